package server

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// breaker tracks whether Redis answers, so that during an outage requests
// skip Redis instead of each paying a timeout: while down, one caller per
// backoff probes it, everyone else goes straight to the in-process path.
// It trips after tripAfter consecutive failures, so one slow reply under
// load does not send a whole instance into degraded mode. It logs once
// when Redis goes away and once when it is back.
type breaker struct {
	backoff  time.Duration
	now      func() time.Time
	log      *slog.Logger
	onChange func(up bool) // told of every transition; may be nil-safe no-op

	mu        sync.Mutex // protects the fields below
	failures  int        // consecutive failures while up
	notify    func()     // a transition to report once the lock is released
	down      bool
	downSince time.Time
	nextProbe time.Time
}

// tripAfter consecutive Redis failures mark Redis down.
const tripAfter = 3

func newBreaker(backoff time.Duration, now func() time.Time, log *slog.Logger) *breaker {
	return &breaker{backoff: backoff, now: now, log: log}
}

// allow reports whether to try Redis now.
func (b *breaker) allow() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.down {
		return true
	}
	if now := b.now(); !now.Before(b.nextProbe) {
		b.nextProbe = now.Add(b.backoff) // this caller is the probe
		return true
	}
	return false
}

// record notes the outcome of a Redis call. A caller's own cancellation
// says nothing about Redis and is ignored.
func (b *breaker) record(err error) {
	if b == nil || errors.Is(err, context.Canceled) {
		return
	}
	b.mu.Lock()
	defer func() {
		notify := b.notify // set by this call's transition, if any
		b.notify = nil
		b.mu.Unlock()
		if notify != nil {
			notify() // outside the lock: the callback may ask the breaker
		}
	}()
	now := b.now()
	switch {
	case err == nil:
		b.failures = 0
		if b.down {
			b.down = false
			b.log.Info("redis is back; leaving degraded mode", slog.Duration("outage", now.Sub(b.downSince)))
			b.changedLocked(true)
		}
	case b.down:
		// still down; the probe failed
	case b.failures+1 < tripAfter:
		b.failures++
	default:
		b.failures = 0
		b.down, b.downSince, b.nextProbe = true, now, now.Add(b.backoff)
		b.log.Warn("redis unreachable; serving with in-process coalescing and no shared cache until it is back",
			slog.String("error", err.Error()))
		b.changedLocked(false)
	}
}

// healthy reports whether Redis answered last time it was asked.
func (b *breaker) healthy() bool {
	if b == nil {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.down
}

// changedLocked schedules onChange for after the lock is released.
func (b *breaker) changedLocked(up bool) {
	if b.onChange != nil {
		b.notify = func() { b.onChange(up) }
	}
}
