package ratelimit

import (
	"context"
	"log/slog"
	"time"

	"github.com/corralhq/corral/internal/breaker"
)

// FallbackOptions configures NewFallback. The zero value is ready to use.
type FallbackOptions struct {
	// Breaker is Redis's health, shared with the rest of the instance
	// (internal/breaker), so one outage is noticed and logged once. Nil:
	// the Fallback keeps its own, which trips on the first failure.
	Breaker *breaker.Breaker
	// Backoff is how long Fallback answers from the local limiter alone
	// after a primary error before one request probes the primary again,
	// when it keeps its own breaker. It keeps an outage from costing every
	// request a dial timeout. Default 1s.
	Backoff time.Duration
	// Now is the clock for the backoff of its own breaker. Default time.Now.
	Now func() time.Time
}

// Fallback answers from primary (Redis) and, while primary fails, from
// local (a Memory). It never returns an error caused by the primary: that
// is fail-open on purpose (see the package doc). During an outage each
// instance enforces the full limit with its own local buckets, so N
// instances admit up to N× the limit; the local buckets start full and the
// Redis buckets resume from whatever Redis holds when it is back.
//
// Whether the primary is asked is its breaker's decision, which logs one
// Warn when Redis goes down and one Info when it is back, not one line per
// request.
type Fallback struct {
	primary, local Limiter
	b              *breaker.Breaker
}

var _ Limiter = (*Fallback)(nil)

// NewFallback returns a Limiter that prefers primary. A nil logger discards.
func NewFallback(primary, local Limiter, logger *slog.Logger, opts FallbackOptions) *Fallback {
	if primary == nil || local == nil {
		panic("ratelimit: NewFallback with nil limiter")
	}
	b := opts.Breaker
	if b == nil {
		b = breaker.New(breaker.Options{TripAfter: 1, Backoff: opts.Backoff, Now: opts.Now, Logger: logger})
	}
	return &Fallback{primary: primary, local: local, b: b}
}

// Healthy reports whether the primary answered the last time it was asked,
// for metrics and /readyz.
func (f *Fallback) Healthy() bool { return f.b.Healthy() }

// AllowN implements Limiter; it never fails because of the primary.
func (f *Fallback) AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	return f.do(ctx, Limiter.AllowN, key, limit, n, false)
}

// ChargeN implements Limiter; it never fails because of the primary.
func (f *Fallback) ChargeN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	return f.do(ctx, Limiter.ChargeN, key, limit, n, true)
}

type op func(Limiter, context.Context, string, Limit, int) (Result, error)

func (f *Fallback) do(ctx context.Context, take op, key string, limit Limit, n int, force bool) (Result, error) {
	// Unlimited and invalid input get the same answer from both sides
	// without I/O; asking local keeps such errors from looking like faults.
	if limit.IsZero() {
		return take(f.local, ctx, key, limit, n)
	}
	if _, err := newGCRA(limit, n, force); err != nil {
		return take(f.local, ctx, key, limit, n)
	}
	if !f.b.Allow() {
		return take(f.local, ctx, key, limit, n)
	}
	r, err := take(f.primary, ctx, key, limit, n)
	if err == nil {
		f.b.Record(nil)
		return r, nil
	}
	if ctx.Err() == nil { // the caller leaving is not the primary's fault
		f.b.Record(err)
	}
	return take(f.local, ctx, key, limit, n)
}
