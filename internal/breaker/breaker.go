// Package breaker tracks whether Redis answers, for every part of Corral
// that uses it: the request path (cache, lock, done bus, live streams) and
// the rate limiter share one Breaker, so an outage is noticed, logged and
// reported once, and every part degrades and recovers together.
//
// While Redis is down, one caller per backoff probes it and everyone else
// goes straight to the in-process path instead of each paying a timeout.
// Run adds a background probe, up or down, so an idle instance notices
// Redis has gone, and that it is back (in /readyz and corral_redis_up),
// within a probe interval and a few probe timeouts rather than at the
// next request. The shape is caddy's two-method passive health
// check: Allow before a call, Record after it.
package breaker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// Options configure a Breaker. The zero value is ready to use.
type Options struct {
	// TripAfter consecutive failures mark Redis down, so one slow reply
	// under load does not send an instance into degraded mode. Default 3.
	TripAfter int
	// Backoff is how long Redis is skipped after it went down, or after a
	// failed probe, before one caller probes it again. Default 1s.
	Backoff time.Duration
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Logger gets one Warn when Redis goes away and one Info when it is
	// back. Default: discard.
	Logger *slog.Logger
	// OnChange is told of every transition (the corral_redis_up gauge). It
	// runs outside the breaker's lock and may call the breaker.
	OnChange func(up bool)
	// Probe asks Redis whether it answers (a PING); used by Run.
	Probe func(ctx context.Context) error
	// ProbeInterval is how often Run probes. Default Backoff.
	ProbeInterval time.Duration
	// ProbeTimeout bounds one probe. Default 500ms (at most ProbeInterval).
	ProbeTimeout time.Duration
}

// Breaker is Redis's health as the whole instance sees it. A nil *Breaker
// is always healthy (embedded mode).
type Breaker struct {
	o Options

	mu        sync.Mutex // protects the fields below
	failures  int        // consecutive failures while up
	notify    func()     // a transition to report once the lock is released
	down      bool
	downSince time.Time
	nextProbe time.Time
}

// New returns a healthy Breaker.
func New(o Options) *Breaker {
	if o.TripAfter <= 0 {
		o.TripAfter = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = time.Second
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = o.Backoff
	}
	if o.ProbeTimeout <= 0 {
		o.ProbeTimeout = 500 * time.Millisecond
	}
	o.ProbeTimeout = min(o.ProbeTimeout, o.ProbeInterval)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{o: o}
}

// Allow reports whether to try Redis now: always while it is up; while it
// is down, for one caller per backoff (the probe).
func (b *Breaker) Allow() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down {
		return true
	}
	if now := b.o.Now(); !now.Before(b.nextProbe) {
		b.nextProbe = now.Add(b.o.Backoff) // this caller is the probe
		return true
	}
	return false
}

// Record notes the outcome of a Redis call. A caller's own cancellation
// says nothing about Redis and is ignored.
func (b *Breaker) Record(err error) {
	if b == nil || errors.Is(err, context.Canceled) {
		return
	}
	b.mu.Lock()
	defer func() {
		notify := b.notify // set by this call's transition, if any
		b.notify = nil
		b.mu.Unlock()
		if notify != nil {
			notify()
		}
	}()
	now := b.o.Now()
	switch {
	case err == nil:
		b.failures = 0
		if b.down {
			b.down = false
			b.o.Logger.Info("redis is back; leaving degraded mode", slog.Duration("outage", now.Sub(b.downSince)))
			b.changedLocked(true)
		}
	case b.down:
		b.nextProbe = now.Add(b.o.Backoff) // the probe failed
	case b.failures+1 < b.o.TripAfter:
		b.failures++
	default:
		b.failures = 0
		b.down, b.downSince, b.nextProbe = true, now, now.Add(b.o.Backoff)
		b.o.Logger.Warn("redis unreachable; serving with in-process coalescing, local limits and no shared cache until it is back",
			slog.String("error", err.Error()))
		b.changedLocked(false)
	}
}

// Healthy reports whether Redis answered the last time it was asked.
func (b *Breaker) Healthy() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down
}

// changedLocked schedules OnChange for after the lock is released.
func (b *Breaker) changedLocked(up bool) {
	if b.o.OnChange != nil {
		b.notify = func() { b.o.OnChange(up) }
	}
}

// Run probes Redis every ProbeInterval until ctx ends; the caller owns
// the goroutine that runs it. Without a Probe it returns at once.
//
// It probes while Redis is up too: an idle instance has no request to
// notice an outage, and /readyz must not say "ok" for a Redis that died.
// A failed probe while up is confirmed at once, up to TripAfter probes in
// a row, rather than one per interval: TripAfter still keeps one slow
// reply from sending the instance into degraded mode, and an outage is
// seen within an interval and TripAfter probe timeouts (1s + 3 × 500ms
// by default) instead of TripAfter intervals.
func (b *Breaker) Run(ctx context.Context) {
	if b == nil || b.o.Probe == nil {
		return
	}
	t := time.NewTicker(b.o.ProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-t.C:
		case <-ctx.Done():
			return
		}
		for range b.o.TripAfter {
			up := b.Healthy()
			err := b.probe(ctx)
			if ctx.Err() != nil {
				return
			}
			b.Record(err)
			if err == nil || !up || !b.Healthy() {
				break // answered, or a probe of a Redis already down, or tripped
			}
		}
	}
}

// probe runs one Probe under ProbeTimeout.
func (b *Breaker) probe(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, b.o.ProbeTimeout)
	defer cancel()
	return b.o.Probe(pctx)
}
