package ratelimit

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// FallbackOptions configures NewFallback. The zero value is ready to use.
type FallbackOptions struct {
	// Backoff is how long Fallback answers from the local limiter alone
	// after a primary error before one request probes the primary again.
	// It keeps an outage from costing every request a dial timeout.
	// Default 1s.
	Backoff time.Duration
	// Now is the clock for the backoff. Default time.Now.
	Now func() time.Time
}

// Fallback answers from primary (Redis) and, while primary fails, from
// local (a Memory). It never returns an error caused by the primary: that
// is fail-open on purpose (see the package doc). During an outage each
// instance enforces the full limit with its own local buckets, so N
// instances admit up to N× the limit; the local buckets start full and the
// Redis buckets resume from whatever Redis holds when it is back.
//
// It logs one Warn when the primary goes down and one Info when it is back,
// not one line per request.
type Fallback struct {
	primary, local Limiter
	log            *slog.Logger
	backoff        time.Duration
	now            func() time.Time

	healthy atomic.Bool // fast path; changed only with mu held

	mu        sync.Mutex // protects retryAt and downSince, and serialises healthy's transitions
	retryAt   time.Time  // while down: when the next request may probe the primary
	downSince time.Time
}

var _ Limiter = (*Fallback)(nil)

// NewFallback returns a Limiter that prefers primary. A nil logger discards.
func NewFallback(primary, local Limiter, logger *slog.Logger, opts FallbackOptions) *Fallback {
	if primary == nil || local == nil {
		panic("ratelimit: NewFallback with nil limiter")
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if opts.Backoff <= 0 {
		opts.Backoff = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	f := &Fallback{primary: primary, local: local, log: logger, backoff: opts.Backoff, now: opts.Now}
	f.healthy.Store(true)
	return f
}

// Healthy reports whether the primary answered the last time it was asked,
// for metrics and /readyz.
func (f *Fallback) Healthy() bool { return f.healthy.Load() }

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
	if !f.usePrimary() {
		return take(f.local, ctx, key, limit, n)
	}
	r, err := take(f.primary, ctx, key, limit, n)
	if err == nil {
		f.up()
		return r, nil
	}
	if ctx.Err() == nil { // the caller leaving is not the primary's fault
		f.down(err)
	}
	return take(f.local, ctx, key, limit, n)
}

// usePrimary reports whether to ask the primary: always while healthy;
// while down, once per backoff, for the request that claims the probe.
func (f *Fallback) usePrimary() bool {
	if f.healthy.Load() {
		return true
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.healthy.Load() {
		return true
	}
	if now.Before(f.retryAt) {
		return false
	}
	f.retryAt = now.Add(f.backoff) // others stay local while this one probes
	return true
}

func (f *Fallback) down(err error) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retryAt = now.Add(f.backoff)
	if f.healthy.Load() {
		f.healthy.Store(false)
		f.downSince = now
		f.log.Warn("ratelimit: redis unavailable, using local limits",
			slog.Any("error", err), slog.Duration("backoff", f.backoff))
	}
}

func (f *Fallback) up() {
	if f.healthy.Load() {
		return
	}
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.healthy.Load() {
		f.healthy.Store(true)
		f.log.Info("ratelimit: redis back, using shared limits",
			slog.Duration("outage", now.Sub(f.downSince)))
	}
}
