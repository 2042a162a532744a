package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Limiter decides, per key, whether units (requests or tokens) fit a Limit.
// Keys come from Key. Memory, Redis and Fallback implement it.
type Limiter interface {
	// AllowN takes n units from key's bucket if they fit now. A refusal is
	// not an error: it is a Result with Allowed false and RetryAfter set.
	// n > limit.Burst can never fit and returns ErrExceedsBurst. n == 0
	// takes nothing and reports the bucket's state. A zero Limit is
	// unlimited: always allowed, no state touched.
	AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error)
	// ChargeN takes n units unconditionally and may put key into debt, which
	// delays its later requests. It is used after an upstream call whose
	// actual token usage exceeded the estimate AllowN admitted.
	ChargeN(ctx context.Context, key string, limit Limit, n int) (Result, error)
}

var (
	// ErrExceedsBurst is returned by AllowN when n is larger than the
	// limit's Burst, so the request could never fit however long the caller
	// waits: for example a request estimated at 50 000 tokens against a
	// 30 000 tokens/min limit. Reject it without a Retry-After (OpenAI
	// answers such a request with 429 rate_limit_exceeded and "Request too
	// large ... Limit 30000, Requested 50000"). The Result carries the Limit.
	ErrExceedsBurst = errors.New("ratelimit: request exceeds the burst of the limit")
	// ErrBadLimit is returned for a Limit that is neither zero (unlimited)
	// nor valid: negative fields, a rate without a burst or period, more than
	// one unit per nanosecond, or a burst window longer than 30 days.
	ErrBadLimit = errors.New("ratelimit: invalid limit")
	// errNegativeN is returned for n < 0, a programming error of the caller.
	errNegativeN = errors.New("ratelimit: negative n")
)

// Limit is Rate units per Period with bursts of up to Burst units. The zero
// Limit (and any Limit with Rate 0, such as PerMinute(0)) means unlimited.
type Limit struct {
	Rate   int
	Burst  int
	Period time.Duration
}

// PerSecond is n units per second, all of which may be taken at once.
func PerSecond(n int) Limit { return Limit{Rate: n, Burst: n, Period: time.Second} }

// PerMinute is n units per minute with Burst n: PerMinute(30) allows 30
// requests at once, then one every 2 s.
func PerMinute(n int) Limit { return Limit{Rate: n, Burst: n, Period: time.Minute} }

// IsZero reports whether l is unlimited (Rate 0).
func (l Limit) IsZero() bool { return l.Rate == 0 }

// String formats l as "30/1m0s burst 30".
func (l Limit) String() string {
	if l.IsZero() {
		return "unlimited"
	}
	return fmt.Sprintf("%d/%v burst %d", l.Rate, l.Period, l.Burst)
}

// Result is the outcome of one decision. For PerMinute(30), so one unit
// every 2 s:
//
//	fresh key, AllowN 1     → Allowed, Remaining 29, RetryAfter 0,  ResetAfter 2s
//	30 taken at once        → Allowed, Remaining 0,  RetryAfter 0,  ResetAfter 60s
//	the 31st, right after   → refused, Remaining 0,  RetryAfter 2s, ResetAfter 60s
//	ChargeN 90 on a fresh key → Allowed, Remaining 0, ResetAfter 3m0s (debt);
//	  an AllowN 1 then waits RetryAfter 2m2s (180 s + 2 s − 60 s burst)
type Result struct {
	// Limit is the limit the decision was made against.
	Limit Limit
	// Allowed reports whether the units were taken.
	Allowed bool
	// Remaining is how many units could be taken right now, after this
	// decision: 0 when the bucket is empty or in debt. A refused AllowN of
	// n tokens may still report Remaining > 0 (but < n).
	Remaining int
	// RetryAfter is how long to wait until the same request would fit; 0
	// when Allowed.
	RetryAfter time.Duration
	// ResetAfter is how long until the bucket is full again (Burst units
	// available); 0 for a full bucket.
	ResetAfter time.Duration
}
