package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// durability watches whether the Redis Corral uses can keep its durable
// state (object owners, API tenants and keys, the audit trail: keys with
// no TTL) across a restart and under memory pressure. It reads INFO
// persistence and CONFIG GET maxmemory-policy at start and every minute;
// what it finds wrong is a warning log line and /readyz's warning (still
// ready: the cache works without any of it).
type durability struct {
	rdb redis.UniversalClient
	log *slog.Logger

	mu      sync.Mutex // protects warning, refused
	warning string     // "" when durable state is safe
	refused bool       // CONFIG GET was refused once (said once)
}

// Warning is the current warning, "" when none.
func (d *durability) Warning() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.warning
}

// run checks at once and then every minute until ctx ends.
func (d *durability) run(ctx context.Context) {
	tick := time.NewTicker(time.Minute)
	defer tick.Stop()
	for {
		d.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// check reads the server's settings once. An unreachable Redis changes
// nothing: the breaker reports that.
func (d *durability) check(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	policy, save, err := d.configGet(ctx)
	if err != nil {
		if isRefused(err) {
			d.mu.Lock()
			first := !d.refused
			d.refused, d.warning = true, ""
			d.mu.Unlock()
			if first {
				d.log.Info("redis durability not checked: the server refuses CONFIG GET (a managed Redis); make sure it persists (AOF or RDB) and evicts only keys with a TTL (volatile-*)")
			}
		}
		return
	}
	info, err := d.rdb.Info(ctx, "persistence").Result()
	if err != nil {
		return
	}
	var problems []string
	if !strings.Contains(info, "aof_enabled:1") && strings.TrimSpace(save) == "" {
		problems = append(problems, "Redis persists nothing (no AOF, no RDB save points): a Redis restart loses every API tenant and key, stored-object owner and audit event")
	}
	if strings.HasPrefix(policy, "allkeys-") {
		problems = append(problems, fmt.Sprintf("Redis maxmemory-policy is %s: under memory pressure it may evict API tenants and keys, object owners and the audit trail; use volatile-lru", policy))
	}
	w := strings.Join(problems, "; ")
	d.mu.Lock()
	changed := w != d.warning
	d.warning = w
	d.mu.Unlock()
	if changed && w != "" {
		d.log.Warn("redis durable state at risk: "+w, slog.String("fix", "run Redis with --appendonly yes --appendfsync everysec and maxmemory-policy volatile-lru"))
	}
}

func (d *durability) configGet(ctx context.Context) (policy, save string, err error) {
	p, err := d.rdb.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", "", err
	}
	s, err := d.rdb.ConfigGet(ctx, "save").Result()
	if err != nil {
		return "", "", err
	}
	return p["maxmemory-policy"], s["save"], nil
}

// isRefused reports a server that answered CONFIG GET with an error (a
// renamed or forbidden command), as opposed to one that did not answer.
func isRefused(err error) bool {
	var re redis.Error
	return errors.As(err, &re) && !strings.HasPrefix(re.Error(), "LOADING")
}
