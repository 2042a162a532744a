package cache

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultOpTimeout is RedisOptions.OpTimeout when it is zero.
const DefaultOpTimeout = 250 * time.Millisecond

// scanCount is the COUNT hint of DeletePattern's SCAN: keys examined per
// round trip, and so the most keys unlinked per round trip.
const scanCount = 1000

// RedisOptions configures NewRedis.
type RedisOptions struct {
	// OpTimeout bounds each Redis round trip; a ctx with an earlier deadline
	// wins. Default DefaultOpTimeout (250ms): a cache lookup slower than
	// that is worth less than asking the upstream.
	//
	// go-redis applies context deadlines to socket reads and writes only
	// when the client has ContextTimeoutEnabled; otherwise a server that
	// accepts but does not answer holds a call for the client's ReadTimeout
	// (3s by default). Build the client with ContextTimeoutEnabled: true.
	OpTimeout time.Duration
	// Now is the clock for filling StoredAt. Default time.Now.
	Now func() time.Time
}

// Redis is the distributed Store. Values are encoded with Marshal; expiry is
// Redis's own (SET PX). It is safe for concurrent use and does not own rdb.
type Redis struct {
	rdb       redis.UniversalClient
	opTimeout time.Duration
	now       func() time.Time
}

var (
	_ Store          = (*Redis)(nil)
	_ PatternDeleter = (*Redis)(nil)
)

// NewRedis returns a store on rdb, which may be a standalone, Sentinel or
// Cluster client.
func NewRedis(rdb redis.UniversalClient, opts RedisOptions) *Redis {
	r := &Redis{rdb: rdb, opTimeout: opts.OpTimeout, now: opts.Now}
	if r.opTimeout <= 0 {
		r.opTimeout = DefaultOpTimeout
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r
}

// opCtx bounds one round trip by OpTimeout unless ctx already ends sooner,
// which spares a timer on the common path of a short request deadline.
func (r *Redis) opCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if d, ok := ctx.Deadline(); ok && time.Until(d) <= r.opTimeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.opTimeout)
}

// Get is one GET. A value that does not decode is a miss: the error matches
// both ErrNotFound and ErrCorrupt. A large entry is shared with the
// process's other readers of the same value (UnmarshalShared): it must not
// be modified.
func (r *Redis) Get(ctx context.Context, key string) (*Entry, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	b, err := r.rdb.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("cache: redis get: %w", err)
	}
	e, err := UnmarshalShared(key, b)
	if err != nil {
		return nil, fmt.Errorf("cache: redis get: %w: %w", ErrNotFound, err)
	}
	return e, nil
}

// Set is one SET with PX. Redis keeps milliseconds: a ttl under 1ms is
// stored as 1ms, and sub-millisecond parts are dropped.
func (r *Redis) Set(ctx context.Context, key string, e *Entry, ttl time.Duration) error {
	if err := checkCacheable(e, ttl); err != nil {
		return err
	}
	val := Marshal(stamped(e, r.now, ttl))
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if err := r.rdb.Set(ctx, key, val, max(ttl, time.Millisecond)).Err(); err != nil {
		return fmt.Errorf("cache: redis set: %w", err)
	}
	return nil
}

// Delete unlinks keys (the memory is freed off Redis's main thread).
func (r *Redis) Delete(ctx context.Context, keys ...string) error {
	if len(keys) == 0 {
		return nil
	}
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	if _, err := unlink(ctx, r.rdb, keys, false); err != nil {
		return fmt.Errorf("cache: redis delete: %w", err)
	}
	return nil
}

// DeletePattern removes every key matching the Redis glob pattern with SCAN
// MATCH and UNLINK, one page of up to scanCount keys per round trip; never
// KEYS, which blocks the server for the whole keyspace. OpTimeout applies to
// each round trip, not to the whole walk: bound that with ctx. On a Cluster
// client it walks every master. Keys written while it runs may survive; a
// key SCAN returns twice is counted once, as UNLINK reports. On error, the
// count of keys already removed is returned with it.
func (r *Redis) DeletePattern(ctx context.Context, pattern string) (int, error) {
	if pattern == "" {
		return 0, ErrEmptyPattern
	}
	if cc, ok := r.rdb.(*redis.ClusterClient); ok {
		var total atomic.Int64 // ForEachMaster runs fn on every master at once
		err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			n, err := r.deletePattern(ctx, node, pattern, true)
			total.Add(int64(n))
			return err
		})
		return int(total.Load()), err
	}
	_, cluster := r.rdb.(*redis.ClusterClient)
	return r.deletePattern(ctx, r.rdb, pattern, cluster)
}

// deletePattern walks one node (or one server). perKey says the keys may
// sit in different Cluster slots, even on one node, so a multi-key UNLINK
// would fail with CROSSSLOT.
func (r *Redis) deletePattern(ctx context.Context, c redis.Cmdable, pattern string, perKey bool) (int, error) {
	var cursor uint64
	total := 0
	for {
		keys, next, err := r.scan(ctx, c, cursor, pattern)
		if err != nil {
			return total, fmt.Errorf("cache: redis scan: %w", err)
		}
		if len(keys) > 0 {
			n, err := r.unlinkPage(ctx, c, keys, perKey)
			total += n
			if err != nil {
				return total, fmt.Errorf("cache: redis unlink: %w", err)
			}
		}
		if next == 0 {
			return total, nil
		}
		cursor = next
	}
}

func (r *Redis) scan(ctx context.Context, c redis.Cmdable, cursor uint64, pattern string) ([]string, uint64, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	return c.Scan(ctx, cursor, pattern, scanCount).Result()
}

func (r *Redis) unlinkPage(ctx context.Context, c redis.Cmdable, keys []string, perKey bool) (int, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	n, err := unlink(ctx, c, keys, perKey)
	return int(n), err
}

// unlink removes keys in one round trip. In a Cluster keys of different
// prompts live in different slots, so a multi-key UNLINK would fail with
// CROSSSLOT, on the Cluster client and on one node's client alike (a purge
// walks each master with its own client): perKey (or a Cluster client)
// sends one UNLINK per key in a pipeline instead, which go-redis splits by
// node.
func unlink(ctx context.Context, c redis.Cmdable, keys []string, perKey bool) (int64, error) {
	if _, ok := c.(*redis.ClusterClient); ok {
		perKey = true
	}
	if !perKey || len(keys) == 1 {
		return c.Unlink(ctx, keys...).Result()
	}
	cmds, err := c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for _, k := range keys {
			p.Unlink(ctx, k)
		}
		return nil
	})
	var n int64
	for _, cmd := range cmds {
		n += cmd.(*redis.IntCmd).Val()
	}
	return n, err
}
