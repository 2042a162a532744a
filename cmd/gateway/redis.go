package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// Redis client deadlines. Every Redis call Corral makes, and every step of
// setting up a connection for it, ends within one of these, so a Redis that
// hangs (SIGSTOP, a full kernel queue, a dead peer behind a live TCP stack)
// costs a request at most a few hundred milliseconds before the breaker
// takes Redis out of the path; Corral answers without Redis.
const (
	// redisDialTimeout bounds the TCP (and TLS) connect.
	redisDialTimeout = time.Second
	// redisIOTimeout bounds each socket read and write, the new
	// connection's HELLO/AUTH/SELECT handshake included (go-redis runs it
	// through the same reader). Blocking commands (XREAD BLOCK) get their
	// block time on top, and callers' context deadlines cut any of them
	// shorter (ContextTimeoutEnabled).
	redisIOTimeout = 500 * time.Millisecond
	// redisPoolTimeout bounds the wait for a free pooled connection.
	redisPoolTimeout = time.Second
)

// redisTopology is how CORRAL_REDIS_URL is read.
type redisTopology struct {
	cluster        bool   // CORRAL_REDIS_CLUSTER: the URL seeds a Redis Cluster
	sentinelMaster string // CORRAL_REDIS_SENTINEL_MASTER: the URL's hosts are Sentinels of this master
}

// newRedis opens the Redis client for distributed mode with timeouts that
// fail fast: a Redis outage must cost a request milliseconds, not the
// library's default seconds, because Corral answers without Redis. One
// server, a Cluster or a Sentinel-watched master get the same deadlines.
// It also routes go-redis's own log lines to log.
func newRedis(ctx context.Context, url string, topo redisTopology, log *slog.Logger) (redis.UniversalClient, error) {
	redis.SetLogger(redisLogger{log})
	// Maintenance notifications (RESP3 pushes from managed Redis) would
	// relax read deadlines to 10 s during a failover; Corral would rather
	// degrade in half a second.
	maint := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	var rdb redis.UniversalClient
	switch {
	case topo.cluster:
		opt, err := redis.ParseClusterURL(url)
		if err != nil {
			return nil, fmt.Errorf("CORRAL_REDIS_URL: not a valid redis cluster URL") // may hold a password: never echo it
		}
		opt.DialTimeout, opt.ReadTimeout, opt.WriteTimeout = redisDialTimeout, redisIOTimeout, redisIOTimeout
		opt.PoolTimeout, opt.ContextTimeoutEnabled = redisPoolTimeout, true
		opt.MaxRetries, opt.DialerRetries, opt.PoolSize = 1, 1, 64
		// A moved slot or a promoted replica needs a few redirects.
		opt.MaxRedirects = 3
		opt.MaintNotificationsConfig = maint
		rdb = redis.NewClusterClient(opt)
	case topo.sentinelMaster != "":
		seeds, err := redis.ParseClusterURL(url) // the same host list form
		if err != nil {
			return nil, fmt.Errorf("CORRAL_REDIS_URL: not a valid redis URL")
		}
		rdb = redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName:    topo.sentinelMaster,
			SentinelAddrs: seeds.Addrs,
			Username:      seeds.Username, Password: seeds.Password,
			SentinelUsername: seeds.Username, SentinelPassword: seeds.Password,
			TLSConfig:   seeds.TLSConfig,
			DialTimeout: redisDialTimeout, ReadTimeout: redisIOTimeout, WriteTimeout: redisIOTimeout,
			PoolTimeout: redisPoolTimeout, ContextTimeoutEnabled: true,
			MaxRetries: 1, DialerRetries: 1, PoolSize: 64,
		})
	default:
		opt, err := redis.ParseURL(url)
		if err != nil {
			// The URL may hold a password: never echo it.
			return nil, fmt.Errorf("CORRAL_REDIS_URL: not a valid redis URL")
		}
		opt.DialTimeout = redisDialTimeout
		opt.ReadTimeout = redisIOTimeout
		opt.WriteTimeout = redisIOTimeout
		opt.PoolTimeout = redisPoolTimeout
		opt.ContextTimeoutEnabled = true // honour per-call deadlines on socket reads and writes
		opt.MaxRetries = 1
		opt.DialerRetries = 1
		opt.PoolSize = 64
		opt.MaintNotificationsConfig = maint
		rdb = redis.NewClient(opt)
	}
	pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	// An unreachable Redis at start is not fatal: Corral serves degraded
	// and picks Redis up when it answers. Ping only to say so early.
	_ = rdb.Ping(pctx).Err()
	return rdb, nil
}

// redisLogger routes go-redis's own log lines (pool, pub/sub, sentinel and
// cluster notices) into Corral's JSON log, where they would otherwise go to
// stderr in the standard library's format. The library's logger is process
// wide; the last gateway set up wins, which in a process is the only one.
type redisLogger struct{ log *slog.Logger }

func (l redisLogger) Printf(ctx context.Context, format string, v ...any) {
	l.log.WarnContext(ctx, "redis client", slog.String("detail", fmt.Sprintf(format, v...)))
}

// clusterReload is how often a Cluster client re-reads the slot map.
const clusterReload = time.Second

// reloadClusterState re-reads the Cluster's slot map every interval until
// the returned stop is called (stop waits for the loop to end). go-redis
// reloads it on a MOVED reply, but a master that died answers nothing at
// all, so without this its slots stay mapped to the dead address after a
// replica took over (tens of seconds of degraded mode instead of one).
// One CLUSTER SLOTS per interval per instance is the cost.
func reloadClusterState(cc *redis.ClusterClient, interval time.Duration) (stop func()) {
	return runEvery(interval, 0, cc.ReloadState)
}
