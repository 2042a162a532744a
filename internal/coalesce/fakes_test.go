package coalesce_test

import (
	"context"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
)

// cluster is what several instances share in distributed mode: a store, a
// lock, a done bus and live streams, all in memory with Redis's semantics.
type cluster struct {
	mu      sync.Mutex // protects the maps and watchers below
	entries map[string]*entry.Entry
	locks   map[string]string // name → holder token
	streams map[string]*memStream
	watch   map[string][]chan struct{}
	tokens  int

	// watched is told every name a waiter starts watching.
	watched chan string
	// appended is told every stream key an instance appends to.
	appended chan string
}

type memStream struct {
	events [][]byte
	ended  bool
	err    error
	origin coalesce.StreamOrigin // what Start recorded
	wake   chan struct{}         // closed and replaced on every change
}

func newCluster() *cluster {
	return &cluster{
		entries:  map[string]*entry.Entry{},
		locks:    map[string]string{},
		streams:  map[string]*memStream{},
		watch:    map[string][]chan struct{}{},
		watched:  make(chan string, 64),
		appended: make(chan string, 64),
	}
}

var (
	_ coalesce.Store   = (*cluster)(nil)
	_ coalesce.Locker  = (*cluster)(nil)
	_ coalesce.Bus     = (*cluster)(nil)
	_ coalesce.Streams = (*cluster)(nil)
)

func (c *cluster) GetMany(_ context.Context, keys ...string) ([]*entry.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*entry.Entry, len(keys))
	for i, k := range keys {
		out[i] = c.entries[k]
	}
	return out, nil
}

func (c *cluster) Set(_ context.Context, key string, e *entry.Entry, ttl time.Duration) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	stored := *e
	stored.StoredAt = time.Now()
	if stored.TTL == 0 { // as the real stores do: an entry keeps its own TTL
		stored.TTL = ttl
	}
	c.entries[key] = &stored
	return nil
}

func (c *cluster) Delete(_ context.Context, keys ...string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range keys {
		delete(c.entries, k)
	}
	return nil
}

func (c *cluster) entry(key string) *entry.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[key]
}

func (c *cluster) TryAcquire(_ context.Context, name string, clear ...string) (coalesce.Release, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acquireLocked(name, clear)
}

func (c *cluster) acquireLocked(name string, clear []string) (coalesce.Release, bool, error) {
	if _, held := c.locks[name]; held {
		return nil, false, nil
	}
	c.tokens++
	token := strconv.Itoa(c.tokens)
	c.locks[name] = token
	for _, k := range clear { // DEL, whatever the key holds
		delete(c.streams, k)
		delete(c.entries, k)
	}
	return func(context.Context) error {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.locks[name] == token {
			delete(c.locks, name)
		}
		return nil
	}, true, nil
}

func (c *cluster) TryAcquireOrRead(_ context.Context, name string, keys []string, clear ...string) (coalesce.Release, bool, []*entry.Entry, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	found := make([]*entry.Entry, len(keys))
	any := false
	for i, k := range keys {
		found[i] = c.entries[k]
		any = any || found[i] != nil
	}
	if any {
		return nil, false, found, nil
	}
	release, ok, err := c.acquireLocked(name, clear)
	return release, ok, found, err
}

func (c *cluster) Holder(_ context.Context, name string) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.locks[name], nil
}

// hold takes name for the test, as a leader on an instance the test plays.
func (c *cluster) hold(name string) coalesce.Release {
	release, ok, _ := c.TryAcquire(context.Background(), name)
	if !ok {
		panic("cluster: " + name + " already held")
	}
	return release
}

func (c *cluster) Watch(name string) (<-chan struct{}, func()) {
	ch := make(chan struct{})
	c.mu.Lock()
	c.watch[name] = append(c.watch[name], ch)
	c.mu.Unlock()
	c.watched <- name
	return ch, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		ws := c.watch[name]
		for i, w := range ws {
			if w == ch {
				c.watch[name] = append(ws[:i:i], ws[i+1:]...)
				break
			}
		}
	}
}

func (c *cluster) Publish(_ context.Context, name string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, w := range c.watch[name] {
		close(w)
	}
	delete(c.watch, name)
	return nil
}

func (c *cluster) streamLocked(key string) *memStream {
	s := c.streams[key]
	if s == nil {
		s = &memStream{wake: make(chan struct{})}
		c.streams[key] = s
	}
	return s
}

func (c *cluster) Start(ctx context.Context, key string, origin coalesce.StreamOrigin, events [][]byte) error {
	c.mu.Lock()
	c.streamLocked(key).origin = origin
	c.mu.Unlock()
	return c.Append(ctx, key, events)
}

func (c *cluster) Append(_ context.Context, key string, events [][]byte) error {
	c.mu.Lock()
	s := c.streamLocked(key)
	s.events = append(s.events, events...)
	close(s.wake)
	s.wake = make(chan struct{})
	c.mu.Unlock()
	c.appended <- key
	return nil
}

func (c *cluster) End(_ context.Context, key string, cause error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.streamLocked(key)
	s.ended, s.err = true, cause
	close(s.wake)
	s.wake = make(chan struct{})
	return nil
}

func (c *cluster) Read(ctx context.Context, key, after string, block time.Duration) (coalesce.StreamBatch, error) {
	from, _ := strconv.Atoi(after)
	t := time.NewTimer(block)
	defer t.Stop()
	for {
		c.mu.Lock()
		s := c.streamLocked(key)
		if from < len(s.events) || s.ended {
			b := coalesce.StreamBatch{Events: append([][]byte(nil), s.events[from:]...), Next: strconv.Itoa(len(s.events)), Ended: s.ended, Err: s.err}
			if from == 0 {
				b.Upstream, b.Provider = s.origin.Upstream, s.origin.Provider
			}
			c.mu.Unlock()
			return b, nil
		}
		wake := s.wake
		c.mu.Unlock()
		select {
		case <-wake:
		case <-t.C:
			return coalesce.StreamBatch{Next: after}, nil
		case <-ctx.Done():
			return coalesce.StreamBatch{Next: after}, ctx.Err()
		}
	}
}

func (c *cluster) Drop(_ context.Context, key string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.streams, key)
	return nil
}

func (c *cluster) Followable(_ context.Context, key string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, ok := c.streams[key]
	return ok && (!s.ended || s.err == nil), nil
}

// caller is a fake upstream: call answers each request, and calls counts
// them.
type caller struct {
	mu    sync.Mutex // protects calls
	calls int
	call  func(ctx context.Context, req *coalesce.Request) (*coalesce.Response, error)
}

func (c *caller) Call(ctx context.Context, req *coalesce.Request) (*coalesce.Response, error) {
	c.mu.Lock()
	c.calls++
	c.mu.Unlock()
	if c.call == nil {
		panic("caller: unexpected upstream call")
	}
	return c.call(ctx, req)
}

func (c *caller) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls
}

// observer records takeovers and call outcomes.
type observer struct {
	mu        sync.Mutex // protects the fields below
	calls     []error
	takeovers int
}

func (o *observer) Called(_ *coalesce.Request, _ coalesce.Outcome, err error, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, err)
}

func (o *observer) TookOver() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.takeovers++
}

func (o *observer) tookOver() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.takeovers
}

// jsonAnswer is a whole 200 answer with usage.
func jsonAnswer(body string) *coalesce.Response {
	return &coalesce.Response{
		Status: 200,
		Header: map[string][]string{"Content-Type": {"application/json"}},
		Kept:   map[string][]string{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(body)),
	}
}
