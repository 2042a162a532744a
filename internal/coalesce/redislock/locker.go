package redislock

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Defaults for Options and BusOptions.
const (
	DefaultTTL       = 10 * time.Second
	DefaultOpTimeout = 500 * time.Millisecond
)

// minTTL keeps the renewal period (TTL/3) at one millisecond or more, the
// resolution of PX and PEXPIRE.
const minTTL = 3 * time.Millisecond

// LockClient is the part of go-redis the Locker uses. Every
// redis.UniversalClient (*redis.Client, *redis.ClusterClient, *redis.Ring)
// satisfies it.
type LockClient interface {
	redis.Scripter
	SetNX(ctx context.Context, key string, value any, expiration time.Duration) *redis.BoolCmd
	Exists(ctx context.Context, keys ...string) *redis.IntCmd
	Get(ctx context.Context, key string) *redis.StringCmd
}

var _ LockClient = redis.UniversalClient(nil)

// Options configures NewLocker. The zero value is ready to use.
type Options struct {
	// TTL is the lock's time to live. The holder renews it every TTL/3, so
	// a dead holder's lock expires at most TTL after its last renewal.
	// Default 10s (DefaultTTL); at least 3ms.
	TTL time.Duration
	// OpTimeout bounds each Redis command: acquire, renew, release, EXISTS.
	// Keep it below TTL/3 so that a slow renewal does not miss ticks.
	// Default 500ms (DefaultOpTimeout).
	OpTimeout time.Duration
}

// Locker acquires named locks in Redis. It is safe for concurrent use.
type Locker struct {
	rdb       LockClient
	ttl       time.Duration
	opTimeout time.Duration
}

// NewLocker returns a Locker on rdb. It panics on a nil client or a
// negative or too small TTL or OpTimeout, which are programmer errors.
func NewLocker(rdb LockClient, opts Options) *Locker {
	if rdb == nil {
		panic("redislock: NewLocker with nil client")
	}
	if opts.TTL == 0 {
		opts.TTL = DefaultTTL
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	if opts.TTL < minTTL {
		panic(fmt.Sprintf("redislock: TTL %v below %v", opts.TTL, minTTL))
	}
	if opts.OpTimeout < 0 {
		panic(fmt.Sprintf("redislock: negative OpTimeout %v", opts.OpTimeout))
	}
	return &Locker{rdb: rdb, ttl: opts.TTL, opTimeout: opts.OpTimeout}
}

// TTL is the lock TTL the Locker sets and renews.
func (l *Locker) TTL() time.Duration { return l.ttl }

// TryAcquire sets name to a fresh random token with SET NX PX TTL. It
// returns a renewing Lease and ok=true when it got the lock, ok=false when
// someone else holds it, and an error when Redis failed or OpTimeout passed;
// the caller then degrades (calls upstream itself) rather than fails.
//
// An error does not prove the lock was not taken: the SET may have been
// applied and only its reply lost. Such an orphan lock has no renewer and
// expires after one TTL.
func (l *Locker) TryAcquire(ctx context.Context, name string) (lease *Lease, ok bool, err error) {
	token := newToken(ctx) // 128 random bits, and the holder's span
	// The TTL counts from no earlier than now, so a renewal deadline
	// measured from here is conservative.
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	ok, err = l.rdb.SetNX(ctx, name, token, l.ttl).Result()
	if err != nil {
		return nil, false, fmt.Errorf("redislock: acquire: %w", err)
	}
	if !ok {
		return nil, false, nil
	}
	return newLease(l, name, token, sent), true, nil
}

// Holder returns the token of whoever holds name, "" when nobody does. A
// follower compares it over time to tell its leader from a successor.
func (l *Locker) Holder(ctx context.Context, name string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	v, err := l.rdb.Get(ctx, name).Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("redislock: get: %w", err)
	}
	return v, nil
}

// Held reports whether anyone holds the lock name (EXISTS). Waiters use it
// to tell "the leader is still working" from "the leader gave up or died".
func (l *Locker) Held(ctx context.Context, name string) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	n, err := l.rdb.Exists(ctx, name).Result()
	if err != nil {
		return false, fmt.Errorf("redislock: exists: %w", err)
	}
	return n > 0, nil
}
