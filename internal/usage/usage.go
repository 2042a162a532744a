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
	"strings"
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
	// CostNanos is what upstream calls cost, SavedNanos what HIT, STALE
	// and COALESCED answers saved, in nano-dollars (internal/spend).
	CostNanos  int64
	SavedNanos int64
	// UnpricedCalls counts upstream answers for a model without a price.
	UnpricedCalls int64
	// ByModel splits the tenant's figures by model: the model that
	// answered, or "other" for what none answered (the server names the
	// rows from answers only, so clients cannot grow the map).
	ByModel map[string]ModelCounters
}

// ModelCounters are one model's part of a tenant's usage.
type ModelCounters struct {
	Requests      int64
	UpstreamCalls int64
	InputTokens   int64
	OutputTokens  int64
	CostNanos     int64
	SavedNanos    int64
}

func (m *ModelCounters) add(o ModelCounters) {
	m.Requests += o.Requests
	m.UpstreamCalls += o.UpstreamCalls
	m.InputTokens += o.InputTokens
	m.OutputTokens += o.OutputTokens
	m.CostNanos += o.CostNanos
	m.SavedNanos += o.SavedNanos
}

// modelFields maps ModelCounters to the suffixes of their Redis hash
// fields ("model:<name>:<suffix>").
func (m *ModelCounters) fields() []struct {
	name string
	v    *int64
} {
	return []struct {
		name string
		v    *int64
	}{
		{"requests", &m.Requests}, {"upstream_calls", &m.UpstreamCalls}, {"input_tokens", &m.InputTokens},
		{"output_tokens", &m.OutputTokens}, {"cost_nanos", &m.CostNanos}, {"saved_nanos", &m.SavedNanos},
	}
}

// modelFieldPrefix starts the hash fields of a model's counters.
const modelFieldPrefix = "model:"

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
	c.CostNanos += o.CostNanos
	c.SavedNanos += o.SavedNanos
	c.UnpricedCalls += o.UnpricedCalls
	for name, m := range o.ByModel {
		if c.ByModel == nil {
			c.ByModel = make(map[string]ModelCounters, len(o.ByModel))
		}
		cur := c.ByModel[name]
		cur.add(m)
		c.ByModel[name] = cur
	}
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
		{"cost_nanos", &c.CostNanos}, {"saved_nanos", &c.SavedNanos}, {"unpriced_calls", &c.UnpricedCalls},
	}
}

// increments lists every non-zero field of c as a hash field and its
// increment, the models' included.
func (c *Counters) increments(yield func(field string, n int64)) {
	for _, f := range c.fields() {
		if *f.v != 0 {
			yield(f.name, *f.v)
		}
	}
	for name, m := range c.ByModel {
		for _, f := range m.fields() {
			if *f.v != 0 {
				yield(modelFieldPrefix+name+":"+f.name, *f.v)
			}
		}
	}
}

// set reads one hash field into c; unknown fields are ignored.
func (c *Counters) set(field, value string) {
	var n int64
	if _, err := fmt.Sscan(value, &n); err != nil {
		return
	}
	if rest, ok := strings.CutPrefix(field, modelFieldPrefix); ok {
		i := strings.LastIndexByte(rest, ':')
		if i < 0 {
			return
		}
		name, suffix := rest[:i], rest[i+1:]
		var m ModelCounters
		for _, f := range m.fields() {
			if f.name == suffix {
				*f.v = n
				c.add(Counters{ByModel: map[string]ModelCounters{name: m}})
				return
			}
		}
		return
	}
	for _, f := range c.fields() {
		if f.name == field {
			*f.v = n
			return
		}
	}
}

// Memory keeps counters in process. The map is bounded by the tenants of
// the tenants file, the only ids the server ever passes.
type Memory struct {
	now  func() time.Time
	mu   sync.Mutex // protects m and days
	m    map[string]*Counters
	days map[dayKey]ModelCounters // per UTC day and model, RetentionDays kept
}

// NewMemory returns empty counters on the wall clock.
func NewMemory() *Memory { return NewMemoryAt(time.Now) }

// NewMemoryAt returns empty counters whose days follow now.
func NewMemoryAt(now func() time.Time) *Memory {
	return &Memory{now: now, m: make(map[string]*Counters), days: make(map[dayKey]ModelCounters)}
}

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
	addDaysLocked(m.days, tenant, Day(m.now()), c)
}

// Get returns tenant's counters.
func (m *Memory) Get(_ context.Context, tenant string) (Counters, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cur := m.m[tenant]; cur != nil {
		var out Counters
		out.add(*cur) // a copy: ByModel is not shared with the caller
		return out, nil
	}
	return Counters{}, nil
}

// take removes and returns every tenant's counters.
func (m *Memory) take() (map[string]*Counters, map[dayKey]ModelCounters) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out, days := m.m, m.days
	m.m = make(map[string]*Counters, len(out))
	m.days = make(map[dayKey]ModelCounters, len(days))
	return out, days
}

// restore puts back counters a failed flush took, on the days they were
// counted.
func (m *Memory) restore(batch map[string]*Counters, days map[dayKey]ModelCounters) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for tenant, c := range batch {
		cur := m.m[tenant]
		if cur == nil {
			cur = &Counters{}
			m.m[tenant] = cur
		}
		cur.add(*c)
	}
	for k, mc := range days {
		cur := m.days[k]
		cur.add(mc)
		m.days[k] = cur
	}
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
	// Now is the clock that names the UTC day of each count. Default
	// time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Redis adds locally and flushes to Redis. Its flusher goroutine stops on
// Close, which flushes once more.
type Redis struct {
	rdb     redis.UniversalClient
	opts    RedisOptions
	pending *Memory
	// moving is held by a flush from the moment it takes the pending
	// counters until Redis has them (or they are put back), and shared
	// by a read of Redis plus the pending part: a read never sees a
	// batch in neither place, or in both.
	moving sync.RWMutex
	stop   chan struct{}
	done   chan struct{}
	once   sync.Once
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
	if opts.Now == nil {
		opts.Now = time.Now
	}
	r := &Redis{rdb: rdb, opts: opts, pending: NewMemoryAt(opts.Now), stop: make(chan struct{}), done: make(chan struct{})}
	go r.loop()
	return r
}

// Add adds c to tenant's local, unflushed counters.
func (r *Redis) Add(tenant string, c Counters) { r.pending.Add(tenant, c) }

// Get returns Redis's counters for tenant plus this instance's unflushed
// ones.
func (r *Redis) Get(ctx context.Context, tenant string) (Counters, error) {
	r.moving.RLock() // before the deadline: a flush holds it at most its own OpTimeout
	defer r.moving.RUnlock()
	ctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	vals, err := r.rdb.HGetAll(ctx, key(tenant)).Result()
	if err != nil {
		return Counters{}, fmt.Errorf("usage: redis read: %w", err)
	}
	var c Counters
	for field, v := range vals {
		c.set(field, v)
	}
	local, _ := r.pending.Get(ctx, tenant)
	c.add(local)
	return c, nil
}

// Flush writes the unflushed counters now. On failure they are kept for
// the next flush.
func (r *Redis) Flush(ctx context.Context) error {
	r.moving.Lock()
	defer r.moving.Unlock()
	batch, days := r.pending.take()
	if len(batch) == 0 && len(days) == 0 {
		return nil
	}
	// Retention: the day that just aged out of each tenant's window goes
	// (durable keys carry no TTL).
	expired := Day(r.opts.Now().AddDate(0, 0, -RetentionDays))
	ctx, cancel := context.WithTimeout(ctx, r.opts.OpTimeout)
	defer cancel()
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for tenant, c := range batch {
			c.increments(func(field string, n int64) { p.HIncrBy(ctx, key(tenant), field, n) })
			p.Unlink(ctx, dayKeyName(tenant, expired))
		}
		for k, mc := range days {
			for _, f := range mc.fields() {
				if *f.v != 0 {
					p.HIncrBy(ctx, dayKeyName(k.tenant, k.day), k.model+"\x00"+f.name, *f.v)
				}
			}
		}
		return nil
	})
	if err != nil {
		r.pending.restore(batch, days) // kept for the next flush
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
