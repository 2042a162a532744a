package main

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// newRedis opens the Redis client for distributed mode with timeouts that
// fail fast: a Redis outage must cost a request milliseconds, not the
// library's default seconds, because Corral answers without Redis.
func newRedis(ctx context.Context, url string) (*redis.Client, error) {
	opt, err := redis.ParseURL(url)
	if err != nil {
		// The URL may hold a password: never echo it.
		return nil, fmt.Errorf("CORRAL_REDIS_URL: not a valid redis URL")
	}
	opt.DialTimeout = time.Second
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.PoolTimeout = time.Second
	opt.ContextTimeoutEnabled = true // honour per-call deadlines on socket reads and writes
	opt.MaxRetries = 1
	opt.DialerRetries = 1
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// An unreachable Redis at start is not fatal: Corral serves degraded
	// and picks Redis up when it answers. Ping only to say so early.
	_ = rdb.Ping(pctx).Err()
	return rdb, nil
}
