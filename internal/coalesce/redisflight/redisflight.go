// Package redisflight adapts Corral's Redis parts to the interfaces the
// flight layer consumes: the lock (coalesce/redislock) with a release
// func instead of a lease, the done bus, and the live streams
// (coalesce/livestream). cmd/gateway wires it in distributed mode; the
// flight layer itself never imports a Redis client.
package redisflight

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/livestream"
	"github.com/corralhq/corral/internal/coalesce/redislock"
)

// Options configure the parts. The zero value takes each part's defaults.
type Options struct {
	// LockTTL is the leader lock's TTL; the holder renews it. Default 10s.
	LockTTL time.Duration
	// Logger gets the bus's connection trouble. Default: discard.
	Logger *slog.Logger
	// Health is told of Redis calls the adapters make on their own (the
	// deletion of a previous leader's stream). Nil: not told.
	Health coalesce.Health
}

// Parts are the Redis sides of a Coalescer.
type Parts struct {
	Locker  *Locker
	Bus     *redislock.Bus
	Streams *Streams
	Marker  *Marker
}

// New builds the parts on rdb. Close releases the bus's subscription.
func New(rdb redis.UniversalClient, o Options) *Parts {
	streams := &Streams{s: livestream.New(rdb, livestream.Options{})}
	return &Parts{
		Locker:  &Locker{l: redislock.NewLocker(rdb, redislock.Options{TTL: o.LockTTL}), streams: streams.s, health: o.Health},
		Bus:     redislock.NewBus(rdb, redislock.BusOptions{Logger: o.Logger}),
		Streams: streams,
		Marker:  &Marker{rdb: rdb},
	}
}

// Marker sets refresh backoff markers with SET NX PX.
type Marker struct{ rdb redis.UniversalClient }

var _ coalesce.Marker = (*Marker)(nil)

// Mark sets name for ttl unless it is set.
func (m *Marker) Mark(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	return m.rdb.SetNX(ctx, name, "1", max(ttl, time.Millisecond)).Result()
}

// Close stops the bus.
func (p *Parts) Close() error { return p.Bus.Close() }

// Locker is redislock's Locker as a coalesce.Locker.
type Locker struct {
	l       *redislock.Locker
	streams *livestream.Streams
	health  coalesce.Health
}

var _ coalesce.Locker = (*Locker)(nil)

// TryAcquire takes the lock with SET NX and, once taken, deletes clear.
func (a *Locker) TryAcquire(ctx context.Context, name string, clear ...string) (coalesce.Release, bool, error) {
	lease, ok, err := a.l.TryAcquire(ctx, name)
	if !ok {
		return nil, false, err
	}
	for _, key := range clear {
		err := a.streams.Clear(ctx, key)
		if a.health != nil {
			a.health.Record(err)
		}
	}
	return lease.Release, true, nil
}

// TryAcquireOrRead reads the entries and takes the lock in one script. An
// unreadable value (corrupt, or a newer codec during a rolling upgrade)
// is a miss that would keep the script from ever taking the lock: then
// the lock is taken the plain way. Large entries are shared with the
// process's other readers of the same value (cache.UnmarshalShared).
func (a *Locker) TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (coalesce.Release, bool, []*entry.Entry, error) {
	lease, ok, vals, err := a.l.TryAcquireOrRead(ctx, name, keys, clear...)
	if err != nil {
		return nil, false, nil, err
	}
	found := make([]*entry.Entry, len(vals))
	undecodable := false
	for i, v := range vals {
		if v == nil {
			continue
		}
		e, derr := cache.UnmarshalShared(keys[i], v)
		if derr != nil {
			undecodable = true
			continue
		}
		found[i] = e
	}
	for _, e := range found {
		if e != nil {
			return nil, false, found, nil
		}
	}
	if undecodable {
		release, ok, err := a.TryAcquire(ctx, name, clear...)
		return release, ok, nil, err
	}
	if !ok {
		return nil, false, found, nil
	}
	return lease.Release, true, found, nil
}

// Holder is the token of whoever holds name.
func (a *Locker) Holder(ctx context.Context, name string) (string, error) {
	return a.l.Holder(ctx, name)
}

// HolderSpan is the span the holder's token carries
// (redislock.SpanOf).
func (a *Locker) HolderSpan(ctx context.Context, name string) (trace.SpanContext, error) {
	token, err := a.l.Holder(ctx, name)
	if err != nil {
		return trace.SpanContext{}, err
	}
	return redislock.SpanOf(token), nil
}

var _ coalesce.LeaderSpans = (*Locker)(nil)

// Streams is livestream's Streams as coalesce.Streams.
type Streams struct{ s *livestream.Streams }

var _ coalesce.Streams = (*Streams)(nil)

// Start adds the first events and the upstream's name and provider in
// one round trip.
func (a *Streams) Start(ctx context.Context, key string, origin coalesce.StreamOrigin, events [][]byte) error {
	return a.s.Start(ctx, key, origin.Upstream, origin.Provider, events)
}

// Append adds events in one round trip.
func (a *Streams) Append(ctx context.Context, key string, events [][]byte) error {
	return a.s.Append(ctx, key, events)
}

// End writes the end marker. A stream its instance's shutdown cut ends
// with coalesce.ErrShutdown's text alone, which Read on another instance
// recognises, so that instance's followers are told the same as the
// leader's own clients (gateway_shutting_down: retry) rather than of a
// broken upstream.
func (a *Streams) End(ctx context.Context, key string, cause error) error {
	if errors.Is(cause, coalesce.ErrShutdown) {
		cause = coalesce.ErrShutdown
	}
	return a.s.End(ctx, key, cause)
}

// Read reads after id, blocking up to block. A stream that ended with a
// shutdown (see End) has an error that is also coalesce.ErrShutdown.
func (a *Streams) Read(ctx context.Context, key, after string, block time.Duration) (coalesce.StreamBatch, error) {
	b, err := a.s.Read(ctx, key, after, block)
	out := coalesce.StreamBatch{Events: b.Events, Next: b.Next, Ended: b.Ended, Err: b.Err, Upstream: b.Upstream, Provider: b.Provider}
	if b.Err != nil && b.Reason == coalesce.ErrShutdown.Error() {
		out.Err = shutdownEnd{b.Err}
	}
	return out, err
}

// shutdownEnd is a live stream's broken end that its leader's shutdown
// wrote: its text is the end's own (the reason already says shutdown), and
// it is also coalesce.ErrShutdown.
type shutdownEnd struct{ error }

func (e shutdownEnd) Unwrap() error { return e.error }

func (shutdownEnd) Is(target error) bool { return target == coalesce.ErrShutdown }

// Followable reports a live or cleanly ended stream.
func (a *Streams) Followable(ctx context.Context, key string) (bool, error) {
	st, err := a.s.Peek(ctx, key)
	return err == nil && (st == livestream.Live || st == livestream.Done), err
}

// Drop removes the stream key.
func (a *Streams) Drop(ctx context.Context, key string) error { return a.s.Clear(ctx, key) }
