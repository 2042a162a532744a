package lockout

import (
	"context"

	"github.com/corralhq/corral/internal/breaker"
)

// Fallback is the distributed Throttle: Redis's count while Redis
// answers, this instance's own (a Memory) while it does not (unreachable,
// hung past the timeout, or refusing: OOM, READONLY...). It never fails.
//
// The local count is kept all along, not only during an outage: every
// wrong token seen here is counted here too, so an outage that starts in
// the middle of a guessing run does not hand the guesser a fresh count,
// and a lock Redis reports is remembered here, so the guesser's next
// attempts on this instance are refused without a round trip.
type Fallback struct {
	primary *Redis
	local   *Memory
	b       *breaker.Breaker
}

var _ Throttle = (*Fallback)(nil)

// NewFallback returns a Throttle that prefers primary. Whether primary is
// asked is b's decision, Redis's health as the whole instance sees it
// (internal/breaker); nil: a breaker of its own that trips on the first
// failure. primary and local should have the same Rule.
func NewFallback(primary *Redis, local *Memory, b *breaker.Breaker) *Fallback {
	if primary == nil || local == nil {
		panic("lockout: NewFallback with a nil side")
	}
	if b == nil {
		b = breaker.New(breaker.Options{TripAfter: 1})
	}
	return &Fallback{primary: primary, local: local, b: b}
}

// Attempt implements Throttle.
func (f *Fallback) Attempt(ctx context.Context, client string, wrong bool) Verdict {
	if d, ok := f.local.refused(client); ok {
		return Verdict{Refused: true, RetryAfter: d}
	}
	if f.b.Allow() {
		v, err := f.primary.Attempt(ctx, client, wrong)
		if err == nil {
			f.b.Record(nil)
			switch {
			case v.Refused:
				f.local.lock(client, v.RetryAfter)
				return v
			case v.Locked:
				f.local.lock(client, f.primary.rule.Lock)
				return v
			}
			if wrong && f.local.fail(client) {
				v.Locked = true // Redis lost the count, or never had it
			}
			return v
		}
		if ctx.Err() == nil { // the caller leaving is not Redis's fault
			f.b.Record(err)
		}
	}
	return f.local.Attempt(ctx, client, wrong)
}
