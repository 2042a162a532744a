package objects

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Registry answers "does this tenant own these objects" and records new
// ones, over a Store. It adds two things a Store alone lacks:
//
//   - A record that could not be written (Redis down or refusing writes
//     right after the upstream created the object) is not lost: it is kept
//     in a bounded pending set, honoured by this instance, and written
//     again in the background until the store takes it.
//   - Lookups of pending records are answered from memory, so the tenant
//     can use what it just created even while the store is away.
//
// Lookups otherwise always go to the store: ownership changes (a delete
// on another instance, an operator's assignment) take effect at once.
type Registry struct {
	store Store
	log   *slog.Logger
	now   func() time.Time
	retry time.Duration
	limit int // most pending records kept

	mu      sync.Mutex // protects pending, running and closed
	pending map[string]Owner
	running bool // the retry loop runs (only while records are pending)
	closed  bool

	stop chan struct{}
	done chan struct{} // closed by the retry loop when it exits; replaced per run
}

// RegistryOptions configure a Registry.
type RegistryOptions struct {
	// Logger receives record failures. Default: discard.
	Logger *slog.Logger
	// RetryEvery is how often pending records are written again. Default 1s.
	RetryEvery time.Duration
	// MaxPending bounds records kept while the store refuses them. Default 100,000.
	MaxPending int
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// maxPending is RegistryOptions.MaxPending's default.
const maxPending = 100_000

// NewRegistry returns a registry over store. Its retry loop runs only
// while some record is pending; Close stops it.
func NewRegistry(store Store, o RegistryOptions) *Registry {
	r := &Registry{
		store:   store,
		log:     o.Logger,
		now:     o.Now,
		retry:   o.RetryEvery,
		pending: make(map[string]Owner),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	if r.now == nil {
		r.now = time.Now
	}
	if r.retry <= 0 {
		r.retry = time.Second
	}
	r.limit = o.MaxPending
	if r.limit <= 0 {
		r.limit = maxPending
	}
	return r
}

// Close stops the retry loop, making one last attempt at pending records.
func (r *Registry) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	close(r.stop)
	running, done := r.running, r.done
	r.mu.Unlock()
	if running {
		<-done
	}
}

// Lookup returns the owners of ids (nil where nobody owns one). Ids longer
// than MaxIDLen are nobody's and are not looked up.
func (r *Registry) Lookup(ctx context.Context, ids []string) ([]*Owner, error) {
	ask := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != "" && len(id) <= MaxIDLen {
			ask = append(ask, id)
		}
	}
	got, err := r.store.Get(ctx, ask)
	if err != nil {
		got = make([]*Owner, len(ask)) // pending records still answer
	}
	byID := make(map[string]*Owner, len(ask))
	for i, id := range ask {
		if got[i] != nil {
			byID[id] = got[i]
		}
	}
	r.mu.Lock()
	for _, id := range ask {
		if o, ok := r.pending[id]; ok && byID[id] == nil {
			byID[id] = &o
		}
	}
	r.mu.Unlock()
	out := make([]*Owner, len(ids))
	for i, id := range ids {
		out[i] = byID[id]
	}
	return out, err
}

// Record claims refs for tenant at upstream. An id that already has an
// owner keeps it (an upstream answer can never move an object between
// tenants). A record the store refuses is kept pending and retried.
func (r *Registry) Record(ctx context.Context, tenant, upstream string, refs []Ref) {
	r.RecordEntry(ctx, tenant, upstream, "", refs)
}

// RecordEntry is Record for the answer of a model call stored in the
// cache entry named entry: the first ref (the answer's own id) keeps the
// entry's name, so deleting the object purges the entry too.
func (r *Registry) RecordEntry(ctx context.Context, tenant, upstream, entry string, refs []Ref) {
	for i, ref := range refs {
		o := Owner{Tenant: tenant, Upstream: upstream, Kind: ref.Kind, Created: r.now().UTC().Truncate(time.Second)}
		if i == 0 {
			o.Entry = entry
		}
		got, err := r.store.Claim(ctx, ref.ID, o)
		if err != nil {
			r.keep(ref.ID, o, err)
			continue
		}
		if got.Tenant != tenant {
			r.log.Warn("object already owned by another tenant; not recorded",
				slog.String("object", ref.ID), slog.String("tenant", tenant), slog.String("owner", got.Tenant))
		}
	}
}

// Assign records id for tenant, replacing any owner (the admin API).
func (r *Registry) Assign(ctx context.Context, id string, o Owner) error {
	if o.Created.IsZero() {
		o.Created = r.now().UTC().Truncate(time.Second)
	}
	r.forget(id)
	return r.store.Set(ctx, id, o)
}

// Remove deletes id's record (the object was deleted through Corral).
func (r *Registry) Remove(ctx context.Context, id string) error {
	r.forget(id)
	return r.store.Delete(ctx, id)
}

func (r *Registry) forget(id string) {
	r.mu.Lock()
	delete(r.pending, id)
	r.mu.Unlock()
}

func (r *Registry) keep(id string, o Owner, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.pending[id]; !ok && len(r.pending) >= r.limit {
		r.log.Error("ownership record lost: pending set full", slog.String("object", id), slog.String("tenant", o.Tenant), slog.Any("error", err))
		return
	}
	r.pending[id] = o
	r.log.Warn("ownership record pending: store refused it", slog.String("object", id), slog.String("tenant", o.Tenant), slog.Any("error", err))
	if !r.running && !r.closed {
		r.running = true
		r.done = make(chan struct{})
		go r.loop(r.done)
	}
}

// Pending returns how many records wait for the store.
func (r *Registry) Pending() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.pending)
}

// loop writes pending records every RetryEvery until none is left (or
// Close), then exits; keep starts it again when a record is refused.
func (r *Registry) loop(done chan struct{}) {
	defer close(done)
	t := time.NewTicker(r.retry)
	defer t.Stop()
	for {
		select {
		case <-r.stop:
			r.flush()
			return
		case <-t.C:
			r.flush()
			r.mu.Lock()
			if len(r.pending) == 0 {
				r.running = false
				r.mu.Unlock()
				return
			}
			r.mu.Unlock()
		}
	}
}

// flush writes pending records; each success leaves the pending set.
func (r *Registry) flush() {
	r.mu.Lock()
	batch := make(map[string]Owner, len(r.pending))
	for id, o := range r.pending {
		batch[id] = o
	}
	r.mu.Unlock()
	for id, o := range batch {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := r.store.Claim(ctx, id, o)
		cancel()
		if err != nil {
			return // the store is still away; try again next tick
		}
		r.mu.Lock()
		if cur, ok := r.pending[id]; ok && cur == o {
			delete(r.pending, id)
		}
		r.mu.Unlock()
		r.log.Info("ownership record written after a retry", slog.String("object", id))
	}
}
