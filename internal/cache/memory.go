package cache

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/maypok86/otter/v2"
)

// DefaultMaxBytes is MemoryOptions.MaxBytes when it is zero: 256 MiB.
const DefaultMaxBytes = 256 << 20

// entryOverhead approximates the bytes an entry costs beyond its key, body
// and header strings: the Entry struct, otter's node and hash-table slot,
// the string and slice headers. Overestimating keeps the real footprint
// under MaxBytes.
const entryOverhead = 256

// MemoryOptions configures NewMemory.
type MemoryOptions struct {
	// MaxBytes bounds the estimated bytes the cache holds: per entry, its
	// key, body, header names and values and a fixed overhead
	// (see entryOverhead). Less used entries are evicted to stay under it.
	// An entry estimated above MaxBytes is refused with ErrNotCacheable.
	// Default DefaultMaxBytes (256 MiB).
	MaxBytes int64
	// Now is the clock for expiry and for filling StoredAt. Default
	// time.Now. With a custom clock, expired entries are removed lazily (on
	// access and during maintenance after writes) instead of also by a
	// once-per-second sweep goroutine; they are never returned either way.
	// Meant for tests.
	Now func() time.Time
}

// Memory is the in-process Store: an otter/v2 cache bounded in estimated
// bytes, with per-entry TTLs. It is safe for concurrent use.
type Memory struct {
	c   *otter.Cache[string, memItem]
	now func() time.Time
	max int64
}

var (
	_ Store          = (*Memory)(nil)
	_ PatternDeleter = (*Memory)(nil)
)

// memItem is what otter stores: the entry, the expiry given to Set (which
// may differ from e.TTL when a caller kept its own TTL) and the weight,
// computed once.
type memItem struct {
	e      *Entry
	ttl    time.Duration
	weight uint32
}

// NewMemory returns an empty memory store. Call Close when done with it to
// stop its clean-up goroutine.
func NewMemory(opts MemoryOptions) *Memory {
	m := &Memory{now: time.Now, max: opts.MaxBytes}
	if m.max <= 0 {
		m.max = DefaultMaxBytes
	}
	o := &otter.Options[string, memItem]{
		MaximumWeight: uint64(m.max),
		Weigher:       func(_ string, it memItem) uint32 { return it.weight },
		ExpiryCalculator: otter.ExpiryWritingFunc(func(en otter.Entry[string, memItem]) time.Duration {
			return en.Value.ttl
		}),
	}
	if opts.Now != nil {
		m.now = opts.Now
		o.Clock = funcClock(opts.Now)
	}
	m.c = otter.Must(o)
	return m
}

// Get returns the stored entry itself, shared with every other reader: it
// must not be modified. ctx is unused; a memory lookup does not wait.
func (m *Memory) Get(_ context.Context, key string) (*Entry, error) {
	it, ok := m.c.GetIfPresent(key)
	if !ok {
		return nil, ErrNotFound
	}
	return it.e, nil
}

// Set stores a shallow copy of e (with StoredAt and TTL filled in when zero)
// that shares e's Body and Header; the caller must not modify them
// afterwards. A replaced entry gets the new ttl.
func (m *Memory) Set(_ context.Context, key string, e *Entry, ttl time.Duration) error {
	if err := checkCacheable(e, ttl); err != nil {
		return err
	}
	w := weigh(key, e)
	if w > m.max || w > math.MaxUint32 {
		return fmt.Errorf("%w: entry of about %d bytes exceeds MaxBytes %d", ErrNotCacheable, w, m.max)
	}
	m.c.Set(key, memItem{e: stamped(e, m.now, ttl), ttl: ttl, weight: uint32(w)})
	return nil
}

// Delete removes keys.
func (m *Memory) Delete(_ context.Context, keys ...string) error {
	for _, k := range keys {
		m.c.Invalidate(k)
	}
	return nil
}

// DeletePattern removes every key matching the Redis glob pattern, with
// Redis's matching rules (see matchGlob), and returns how many live entries
// it removed. It walks all keys, which takes about 100ns per entry: fine for
// an admin purge, not for a request path. Entries written while it runs may
// survive.
func (m *Memory) DeletePattern(_ context.Context, pattern string) (int, error) {
	if pattern == "" {
		return 0, ErrEmptyPattern
	}
	var match []string
	for k := range m.c.Keys() {
		if matchGlob(pattern, k) {
			match = append(match, k)
		}
	}
	n := 0
	for _, k := range match {
		if _, ok := m.c.Invalidate(k); ok {
			n++
		}
	}
	return n, nil
}

// Len is the approximate number of entries, for metrics. Expired entries
// not yet cleaned up may be counted.
func (m *Memory) Len() int { return m.c.EstimatedSize() }

// Bytes is the approximate estimated weight held, for metrics; it stays
// within MaxBytes once pending maintenance has run.
func (m *Memory) Bytes() int64 { return int64(m.c.WeightedSize()) }

// Close stops the cache's periodic clean-up goroutine. The store still works
// afterwards, expiring entries lazily. It always returns nil.
func (m *Memory) Close() error {
	m.c.StopAllGoroutines()
	return nil
}

// weigh estimates the bytes key and e cost in memory.
func weigh(key string, e *Entry) int64 {
	w := int64(entryOverhead + len(key) + len(e.Body))
	for name, vs := range e.Header {
		w += int64(len(name)) + 24 // the slice header
		for _, v := range vs {
			w += int64(len(v)) + 16 // the string header
		}
	}
	return w
}

// funcClock adapts a now func to otter.Clock. Its nil Tick channel tells
// otter to run no periodic clean-up goroutine: a test clock does not tick.
type funcClock func() time.Time

func (f funcClock) NowNano() int64                      { return f().UnixNano() }
func (f funcClock) Tick(time.Duration) <-chan time.Time { return nil }
