package ratelimit

import (
	"fmt"
	"math"
	"math/bits"
	"time"
)

// maxAhead caps how far a key's TAT may run ahead of now: the longest debt
// and the longest burst window. 30 days in nanoseconds is below 2^53, so the
// Lua script (whose numbers are float64) computes with it exactly.
const maxAhead = int64(30 * 24 * time.Hour)

// gcra holds one decision's arithmetic in whole nanoseconds. Memory runs it
// in Go; gcra.lua mirrors decide line for line, and both call result.
type gcra struct {
	limit Limit
	inc   int64 // cost of the n units: floor(n×Period/Rate), ≤ maxAhead
	burst int64 // burst tolerance: floor(Burst×Period/Rate), how far TAT may run ahead
	n     int
}

// newGCRA validates limit and n. force is true for ChargeN, which accepts any
// n; AllowN refuses n > Burst with ErrExceedsBurst. The limit must not be
// zero (callers answer unlimited before).
func newGCRA(limit Limit, n int, force bool) (gcra, error) {
	if err := limit.validate(); err != nil {
		return gcra{}, err
	}
	if n < 0 {
		return gcra{}, fmt.Errorf("%w: %d", errNegativeN, n)
	}
	if !force && n > limit.Burst {
		return gcra{}, ErrExceedsBurst
	}
	return gcra{
		limit: limit,
		inc:   min(mulDiv(uint64(n), uint64(limit.Period), uint64(limit.Rate)), maxAhead),
		burst: mulDiv(uint64(limit.Burst), uint64(limit.Period), uint64(limit.Rate)),
		n:     n,
	}, nil
}

func (l Limit) validate() error {
	switch {
	case l.Rate < 0 || l.Burst <= 0 || l.Period <= 0:
		return fmt.Errorf("%w: %v", ErrBadLimit, l)
	case int64(l.Period) < int64(l.Rate): // emission interval under 1 ns
		return fmt.Errorf("%w: %v: more than one unit per nanosecond", ErrBadLimit, l)
	case mulDiv(uint64(l.Burst), uint64(l.Period), uint64(l.Rate)) > maxAhead:
		return fmt.Errorf("%w: %v: burst window over 30 days", ErrBadLimit, l)
	}
	return nil
}

// decide takes the units if they fit (or unconditionally when force). ahead
// is TAT−now before the decision; a TAT in the past is a full bucket. It
// returns TAT−now after the decision, which is unchanged when refused.
func (g gcra) decide(ahead int64, force bool) (after int64, allowed bool) {
	ahead = max(ahead, 0)
	next := min(ahead+g.inc, maxAhead) // both ≤ maxAhead: no overflow
	if !force && next > g.burst {
		return ahead, false
	}
	return next, true
}

// result describes the key's state, ahead = TAT−now after the decision.
func (g gcra) result(allowed bool, ahead int64) Result {
	r := Result{
		Limit:      g.limit,
		Allowed:    allowed,
		Remaining:  g.remaining(g.burst - ahead),
		ResetAfter: time.Duration(ahead),
	}
	if !allowed {
		r.RetryAfter = time.Duration(ahead + g.inc - g.burst)
	}
	return r
}

// remaining is the largest m with floor(m×Period/Rate) ≤ room, that is the
// largest m < (room+1)×Rate/Period, capped at Burst.
func (g gcra) remaining(room int64) int {
	if room < 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(room)+1, uint64(g.limit.Rate))
	lo, borrow := bits.Sub64(lo, 1, 0)
	hi -= borrow
	p := uint64(g.limit.Period)
	if hi >= p {
		return g.limit.Burst
	}
	m, _ := bits.Div64(hi, lo, p)
	return int(min(m, uint64(g.limit.Burst)))
}

// mulDiv is floor(a×b/c) without overflow, saturated at MaxInt64.
func mulDiv(a, b, c uint64) int64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	return int64(min(q, math.MaxInt64))
}

// unlimited is the answer for a zero Limit.
func unlimited(limit Limit) Result { return Result{Limit: limit, Allowed: true} }
