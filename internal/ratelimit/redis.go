package ratelimit

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed gcra.lua
var gcraSource string

// gcraScript runs by EVALSHA and falls back to EVAL when the server's script
// cache lacks it (after a restart or SCRIPT FLUSH); redis.Script.Run does both.
var gcraScript = redis.NewScript(gcraSource)

// RedisOptions configures NewRedis. The zero value is ready to use.
type RedisOptions struct {
	// Timeout bounds one decision (one round trip) on top of the caller's
	// context. Default 0: only the caller's context and the client's own
	// DialTimeout/ReadTimeout apply. go-redis honours context deadlines on
	// sockets only with ContextTimeoutEnabled; otherwise set its timeouts low.
	Timeout time.Duration
}

// Redis is the distributed Limiter: each decision is one atomic run of
// gcra.lua, which reads Redis TIME, so all instances share one clock and one
// bucket per key. A key's entry expires when its bucket is full again.
type Redis struct {
	rdb     redis.Scripter
	timeout time.Duration
	// now overrides Redis TIME; set only by tests so that the behaviour
	// table runs on a real redis-server with an exact clock.
	now func() time.Time
}

var _ Limiter = (*Redis)(nil)

// NewRedis returns a limiter storing its buckets in rdb: a *redis.Client,
// *redis.ClusterClient, *redis.Ring or any redis.UniversalClient. Keys carry
// a hash tag (see Key), so they work with Cluster. It needs Redis ≥ 3.2.
func NewRedis(rdb redis.Scripter, opts RedisOptions) *Redis {
	if rdb == nil {
		panic("ratelimit: NewRedis with nil client")
	}
	return &Redis{rdb: rdb, timeout: opts.Timeout}
}

// AllowN implements Limiter with one round trip.
func (r *Redis) AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	return r.take(ctx, key, limit, n, false)
}

// ChargeN implements Limiter with one round trip.
func (r *Redis) ChargeN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	return r.take(ctx, key, limit, n, true)
}

func (r *Redis) take(ctx context.Context, key string, limit Limit, n int, force bool) (Result, error) {
	if limit.IsZero() {
		return unlimited(limit), nil
	}
	g, err := newGCRA(limit, n, force)
	if err != nil {
		return Result{Limit: limit}, err
	}
	f := 0
	if force {
		f = 1
	}
	args := []any{g.inc, g.burst, f, maxAhead}
	if r.now != nil {
		t := r.now()
		args = append(args, t.Unix(), t.Nanosecond())
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	vals, err := gcraScript.Run(ctx, r.rdb, []string{key}, args...).Int64Slice()
	if err != nil {
		return Result{Limit: limit}, fmt.Errorf("ratelimit: redis: %w", err)
	}
	if len(vals) != 2 {
		return Result{Limit: limit}, fmt.Errorf("ratelimit: redis: unexpected reply %v", vals)
	}
	return g.result(vals[0] == 1, vals[1]), nil
}
