// Package usage keeps per-tenant usage and savings counters: requests,
// hits, coalesced and negative answers, upstream calls, tokens used and
// tokens saved. They answer the question operators ask first: what does
// Corral save each team?
//
// In embedded mode they live in memory. In distributed mode each instance
// adds to local counters and flushes them to a Redis hash per tenant every
// interval (HINCRBY in one pipeline), so the numbers add up across
// instances without a Redis round trip per request; a read returns what
// Redis holds plus this instance's unflushed part.
package usage

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Counters are one tenant's usage.
type Counters struct {
	Requests      int64
	Hits          int64
	Coalesced     int64
	Negative      int64
	Stale         int64
	Bypass        int64
	UpstreamCalls int64
	TokensUsed    int64
	TokensSaved   int64
}

func (c *Counters) add(o Counters) {
	c.Requests += o.Requests
	c.Hits += o.Hits
	c.Coalesced += o.Coalesced
	c.Negative += o.Negative
	c.Stale += o.Stale
	c.Bypass += o.Bypass
	c.UpstreamCalls += o.UpstreamCalls
	c.TokensUsed += o.TokensUsed
	c.TokensSaved += o.TokensSaved
}

// fields maps Counters to Redis hash fields, one place for both directions.
func (c *Counters) fields() []struct {
	name string
	v    *int64
} {
	return []struct {
		name string
		v    *int64
	}{
		{"requests", &c.Requests}, {"hits", &c.Hits}, {"coalesced", &c.Coalesced}, {"negative", &c.Negative}, {"stale", &c.Stale},
		{"bypass", &c.Bypass}, {"upstream_calls", &c.UpstreamCalls}, {"tokens_used", &c.TokensUsed}, {"tokens_saved", &c.TokensSaved},
	}
}

// Memory keeps counters in process. The map is bounded by the tenants of
// the tenants file, the only ids the server ever passes.
type Memory struct {
	mu sync.Mutex // protects m
	m  map[string]*Counters
}

// NewMemory returns empty counters.
func NewMemory() *Memory { return &Memory{m: make(map[string]*Counters)} }

// Add adds c to tenant's counters.
func (m *Memory) Add(tenant string, c Counters) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cur := m.m[tenant]
	if cur == nil {
		cur = &Counters{}
		m.m[tenant] = cur
	}
	cur.add(c)
}

// Get returns tenant's counters.
func (m *Memory) Get(_ context.Context, tenant string) (Counters, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.m[tenant]; cur != nil {
		return *cur, nil
	}
	return Counters{}, nil
}

// take removes and returns every tenant's counters.
func (m *Memory) take() map[string]*Counters {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.m
	m.m = make(map[string]*Counters, len(out))
	return out
}

// KeyPrefix starts every usage hash: corral:v1:usage:{<tenant>}.
const KeyPrefix = "corral:v1:usage:"

func key(tenant string) string { return KeyPrefix + "{" + tenant + "}" }

// RedisOptions configure a Redis recorder.
type RedisOptions struct {
	// Interval between flushes. Default 1s.
	Interval time.Duration
	// OpTimeout bounds one flush or read. Default 500ms.
	OpTimeout time.Duration
	Logger    *slog.Logger
}

// Redis adds locally and flushes to Redis. Its flusher goroutine stops on
// Close, which flushes once more.
type Redis struct {
	rdb     redis.UniversalClient
	opts    RedisOptions
	pending *Memory
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once
}

// NewRedis starts a recorder that flushes to rdb.
func NewRedis(rdb redis.UniversalClient, opts RedisOptions) *Redis {
	if opts.Interval <= 0 {
		opts.Interval = time.Second
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = 500 * time.Millisecond
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Redis{rdb: rdb, opts: opts, pending: NewMemory(), stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// Add adds c to tenant's local, unflushed counters.
func (r *Redis) Add(tenant string, c Counters) { r.pending.Add(tenant, c) }

// Get returns Redis's counters for tenant plus this instance's unflushed
// ones.
func (r *Redis) Get(ctx context.Context, tenant string) (Counters, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	vals, err := r.rdb.HGetAll(ctx, key(tenant)).Result()
	if err != nil {
		return Counters{}, fmt.Errorf("usage: redis read: %w", err)
	}
	var c Counters
	for _, f := range c.fields() {
		if v, ok := vals[f.name]; ok {
			_, _ = fmt.Sscan(v, f.v)
		}
	}
	local, _ := r.pending.Get(ctx, tenant)
	c.add(local)
	return c, nil
}

// Flush writes the unflushed counters now. On failure they are kept for
// the next flush.
func (r *Redis) Flush(ctx context.Context) error {
	batch := r.pending.take()
	if len(batch) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for tenant, c := range batch {
			for _, f := range c.fields() {
				if *f.v != 0 {
					p.HIncrBy(ctx, key(tenant), f.name, *f.v)
				}
			}
		}
		return nil
	})
	if err != nil {
		for tenant, c := range batch {
			r.pending.Add(tenant, *c) // kept for the next flush
		}
		return fmt.Errorf("usage: redis flush: %w", err)
	}
	return nil
}

func (r *Redis) loop() {
	defer close(r.done)
	t := time.NewTicker(r.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-r.stop:
			_ = r.Flush(context.Background())
			return
		case <-t.C:
			err := r.Flush(context.Background())
			if err != nil && !failing {
				r.opts.Logger.Warn("usage counters not flushed to redis; keeping them locally", slog.String("error", err.Error()))
			}
			failing = err != nil
		}
	}
}

// Close stops the flusher after a last flush.
func (r *Redis) Close() error {
	r.once.Do(func() { close(r.stop) })
	<-r.done
	return nil
}
