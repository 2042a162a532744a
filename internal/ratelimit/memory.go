package ratelimit

import (
	"context"
	"sync"
	"time"
)

// MemoryOptions configures NewMemory. The zero value is ready to use.
type MemoryOptions struct {
	// Now is the clock. Default time.Now (differences use its monotonic
	// reading, so wall-clock jumps do not refill or drain buckets).
	Now func() time.Time
	// MaxKeys bounds the number of buckets held. Default 100 000 (about
	// 10 MB). A tenant uses two keys, so the bound is a safety net that a
	// configured tenant list does not reach; past it, the bucket closest to
	// full among a small sample is forgotten, which refills it early.
	MaxKeys int
	// SweepEvery is the minimum number of decisions between sweeps that drop
	// full buckets (a full bucket is the same as no entry). A sweep runs after
	// max(SweepEvery, number of buckets) decisions, so its cost per decision
	// is O(1) amortised. Default 1024.
	SweepEvery int
}

// Memory is the in-process Limiter of embedded mode and the local side of
// Fallback. It keeps one TAT per key and starts no goroutine: cleanup runs
// inline, on access.
type Memory struct {
	now        func() time.Time
	base       time.Time // TATs are nanoseconds since base
	maxKeys    int
	sweepEvery int

	mu      sync.Mutex       // protects buckets and ops
	buckets map[string]int64 // key → TAT, ns since base; absent = full bucket
	ops     int              // decisions since the last sweep
}

var _ Limiter = (*Memory)(nil)

// evictSample is how many entries an eviction looks at.
const evictSample = 8

// NewMemory returns an empty memory limiter.
func NewMemory(opts MemoryOptions) *Memory {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.MaxKeys <= 0 {
		opts.MaxKeys = 100_000
	}
	if opts.SweepEvery <= 0 {
		opts.SweepEvery = 1024
	}
	return &Memory{
		now:        opts.Now,
		base:       opts.Now(),
		maxKeys:    opts.MaxKeys,
		sweepEvery: opts.SweepEvery,
		buckets:    make(map[string]int64),
	}
}

// AllowN implements Limiter. It does no I/O and ignores ctx.
func (m *Memory) AllowN(_ context.Context, key string, limit Limit, n int) (Result, error) {
	return m.take(key, limit, n, false)
}

// ChargeN implements Limiter. It does no I/O and ignores ctx.
func (m *Memory) ChargeN(_ context.Context, key string, limit Limit, n int) (Result, error) {
	return m.take(key, limit, n, true)
}

// Len is the number of buckets held (those not full).
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.buckets)
}

func (m *Memory) take(key string, limit Limit, n int, force bool) (Result, error) {
	if limit.IsZero() {
		return unlimited(limit), nil
	}
	g, err := newGCRA(limit, n, force)
	if err != nil {
		return Result{Limit: limit}, err
	}
	now := int64(m.now().Sub(m.base))

	m.mu.Lock()
	m.maybeSweepLocked(now)
	tat, ok := m.buckets[key]
	ahead := int64(0)
	if ok {
		ahead = tat - now
	}
	after, allowed := g.decide(ahead, force)
	if allowed && g.inc > 0 {
		if !ok && len(m.buckets) >= m.maxKeys {
			m.evictLocked()
		}
		m.buckets[key] = now + after
	}
	m.mu.Unlock()

	return g.result(allowed, after), nil
}

// maybeSweepLocked drops full buckets once enough decisions have passed.
func (m *Memory) maybeSweepLocked(now int64) {
	m.ops++
	if m.ops < max(m.sweepEvery, len(m.buckets)) {
		return
	}
	m.ops = 0
	for k, tat := range m.buckets {
		if tat <= now {
			delete(m.buckets, k)
		}
	}
}

// evictLocked forgets the bucket with the earliest TAT (the closest to full)
// among a few entries; map iteration order makes the sample random. It
// hands that key an early refill, which is why MaxKeys is set far above the
// expected number of keys.
func (m *Memory) evictLocked() {
	var victim string
	var oldest int64
	i := 0
	for k, tat := range m.buckets {
		if i == 0 || tat < oldest {
			victim, oldest = k, tat
		}
		if i++; i == evictSample {
			break
		}
	}
	delete(m.buckets, victim)
}
