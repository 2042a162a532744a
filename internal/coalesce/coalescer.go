package coalesce

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce/flight"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/negcache"
)

// Options wire a Coalescer. Store and Caller are required; Locker, Bus and
// Streams are nil in embedded mode.
type Options struct {
	Store    Store
	Caller   Caller
	Observer Observer // nil observes nothing
	// Health gates every Redis call (nil: always try). Embedded mode has
	// none.
	Health Health

	Locker  Locker
	Bus     Bus
	Streams Streams
	// Marker holds the refresh backoff across instances; nil (embedded
	// mode) keeps it in process.
	Marker Marker

	// LockTTL is the lock's TTL, which bounds how soon followers notice a
	// dead leader. Default 10s.
	LockTTL time.Duration
	// PollInterval is the waiters' safety-net poll. Default 50ms.
	PollInterval time.Duration
	// WaitTimeout is the longest a waiter waits for another instance's
	// call. Default 120s.
	WaitTimeout time.Duration
	// FailOnWaitTimeout ends a wait that timed out with ErrWaitTimeout
	// instead of calling upstream itself.
	FailOnWaitTimeout bool
	// LeaderWait bounds the wait for the tenant's leader semaphore before
	// a ConcurrencyError. Default 10s.
	LeaderWait time.Duration
	// MaxBody bounds a non-streamed upstream answer. Default 64 MiB.
	MaxBody int64
	// Transient reports a call error that is the upstream's passing
	// trouble (a timeout, a connection error, every candidate's circuit
	// open), after which an entry within a stale window is served instead
	// (stale-if-error). Answers with status 429 or 5xx are transient too.
	// Nil: no error is.
	Transient func(error) bool
	// Render is the answer a client gets for a flight's error: the status
	// and body the HTTP layer would send for it. A leader whose call failed
	// transiently (Transient, or a 429 or 5xx passed through) stores that
	// answer for FailureTTL under the prompt's failure key before it
	// releases its lock, and the waiters on other instances that were
	// waiting for it answer with it instead of leading a new attempt that
	// would fail the same way a moment later. Nil: a failed call's error
	// is not shared (a passed-through 429 or 5xx still is).
	Render func(req *Request, err error) *entry.Entry
	// FailureTTL is how long a leader's transient failure stays for its
	// waiters to read. It only needs to outlast their wake-up (a "done"
	// notice, or one PollInterval): the next leader deletes it as it takes
	// the lock. Default 5s.
	FailureTTL time.Duration
	// RefreshBackoff is the least time between two background refreshes
	// of one stale entry (on any instance), so a failing upstream gets no
	// storm of refreshes. Default 5s.
	RefreshBackoff time.Duration
	// Tracer records the lock wait across instances; nil records
	// nothing.
	Tracer trace.Tracer
	// Now is the clock that decides whether a stored entry is still fresh
	// (entry.Classify); it should be the store's. Default time.Now.
	Now func() time.Time
}

// Coalescer runs flights. It is safe for concurrent use.
type Coalescer struct {
	o       Options
	groups  sync.Map       // tenant id → *group: one tenant's keys never contend with another's
	running sync.WaitGroup // flights running; they may outlive their requests
	marks   *memMarker     // the refresh backoff without Redis
	stop    context.Context
	stopNow context.CancelCauseFunc // ends stop with ErrShutdown
}

type group = flight.Group[*state]

// New returns a Coalescer.
func New(o Options) (*Coalescer, error) {
	if o.Store == nil || o.Caller == nil {
		return nil, errors.New("coalesce: Store and Caller are required")
	}
	o.LockTTL = cmp.Or(o.LockTTL, 10*time.Second)
	o.PollInterval = cmp.Or(o.PollInterval, 50*time.Millisecond)
	o.WaitTimeout = cmp.Or(o.WaitTimeout, 120*time.Second)
	o.LeaderWait = cmp.Or(o.LeaderWait, 10*time.Second)
	o.MaxBody = cmp.Or(o.MaxBody, 64<<20)
	o.RefreshBackoff = cmp.Or(o.RefreshBackoff, 5*time.Second)
	o.FailureTTL = cmp.Or(o.FailureTTL, 5*time.Second)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Observer == nil {
		o.Observer = nopObserver{}
	}
	if o.Tracer == nil {
		o.Tracer = noop.NewTracerProvider().Tracer("")
	}
	if o.Health == nil {
		o.Health = alwaysHealthy{}
	}
	stop, stopNow := context.WithCancelCause(context.Background())
	return &Coalescer{o: o, marks: newMemMarker(o.Now), stop: stop, stopNow: stopNow}, nil
}

// Stop ends every flight, running or yet to start, with ErrShutdown: the
// upstream calls are cancelled, streams being relayed end with that error
// (so every client's stream gets its error event), live streams this
// instance publishes are ended and deleted, and locks are released. It is
// the last step of a shutdown whose grace period ran out; Wait then
// returns as soon as the flights have cleaned up.
func (c *Coalescer) Stop() { c.stopNow(ErrShutdown) }

// readsWithLock is the one decision of whether a flight's lock call also
// reads the prompt's entries (one Redis round trip instead of two): in
// distributed mode, unless the request wants entries fresher than some
// time, which it must check itself.
func (c *Coalescer) readsWithLock(req *Request) bool {
	return c.o.Locker != nil && req.MinStoredAt.IsZero()
}

// Lookup serves a request from the cache before it joins a flight: the
// stored answer (Hit) or remembered failure (Negative). ok=false is a
// miss. A no-cache request never reads; a streaming request whose lock
// call reads the entries skips this separate read, so a streaming miss
// pays one Redis round trip before its upstream call (time to first byte
// is what streams are for).
//
// Within the tenant's stale_while_revalidate window past its TTL, an
// entry is answered at once as Stale (the caller then starts a Refresh),
// unless the request wants a fresh answer (NoCache, MinStoredAt). A
// streaming request of a tenant with that window reads here too, so that
// it gets the stale entry.
func (c *Coalescer) Lookup(ctx context.Context, req *Request) (out Outcome, ok bool) {
	if req.NoCache || (req.Stream && c.readsWithLock(req) && req.StaleWhileRevalidate <= 0) {
		return Outcome{}, false
	}
	es := c.read(ctx, keying.Name(req.Tenant, req.Hash, keying.Response), negcache.Key(req.Tenant, req.Hash))
	if es == nil {
		return Outcome{}, false
	}
	if e, neg := c.pick(es[0], es[1], req.MinStoredAt); e != nil {
		return Outcome{Entry: e, Source: storedSource(neg, false)}, true
	}
	if e := es[0]; e != nil && req.MinStoredAt.IsZero() &&
		entry.Classify(e, c.o.Now(), req.StaleWhileRevalidate, req.StaleIfError) == entry.StaleRevalidate {
		return Outcome{Entry: e, Source: Stale}, true
	}
	return Outcome{}, false
}

// Refresh refreshes the entry of req's prompt, just served stale, in the
// background: unless a refresh of it started within RefreshBackoff (on
// any instance), it joins the prompt's flight (starting one that calls
// upstream only if it takes the lock) and leaves once the flight ends.
// The flight is detached from the client and bounded by the upstream
// call's own timeout; its answer replaces the entry. req.Tokens, when
// set, is the refresh's own charge (a budget reservation), taken as a
// leader's is. It reports whether a refresh started.
func (c *Coalescer) Refresh(req *Request) bool {
	if !c.mark(keying.Name(req.Tenant, req.Hash, keying.Refresh)) {
		return false
	}
	r := *req
	r.Refresh, r.NoCache, r.Relays = true, false, false // no client: nobody relays
	f := c.Join(r.Tenant, r.Hash, func() *Request { return &r })
	c.running.Add(1)
	go func() {
		defer c.running.Done()
		defer f.Leave()
		<-f.Done()
	}()
	return true
}

// mark sets a refresh's backoff marker: in Redis when there is one and it
// answers, else in process. ok=false means a refresh started recently.
func (c *Coalescer) mark(name string) bool {
	if c.o.Marker != nil && c.o.Health.Allow() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		ok, err := c.o.Marker.Mark(ctx, name, c.o.RefreshBackoff)
		cancel()
		c.o.Health.Record(err)
		if err == nil {
			return ok
		}
	}
	return c.marks.mark(name, c.o.RefreshBackoff)
}

// lookup reads a prompt's positive and negative entries in one round trip
// and returns the one to serve (negcache.Pick). A store failure is a miss.
func (c *Coalescer) lookup(ctx context.Context, name, negName string, minStoredAt time.Time) (e *entry.Entry, negative bool) {
	es := c.read(ctx, name, negName)
	if es == nil {
		return nil, false
	}
	return c.pick(es[0], es[1], minStoredAt)
}

// read reads a prompt's positive and negative entries in one round trip;
// nil when the store failed (a miss).
func (c *Coalescer) read(ctx context.Context, name, negName string) []*entry.Entry {
	if !c.o.Health.Allow() {
		return nil
	}
	es, err := c.o.Store.GetMany(ctx, name, negName)
	c.o.Health.Record(err)
	if err != nil || len(es) != 2 {
		return nil
	}
	return es
}

// pick is negcache.Pick over the entries that are still fresh: a store
// keeps a positive entry past its TTL for the stale windows, and such an
// entry is never served as a hit.
func (c *Coalescer) pick(pos, neg *entry.Entry, minStoredAt time.Time) (e *entry.Entry, negative bool) {
	now := c.o.Now()
	if pos != nil && entry.Classify(pos, now, 0, 0) != entry.Fresh {
		pos = nil
	}
	if neg != nil && entry.Classify(neg, now, 0, 0) != entry.Fresh {
		neg = nil
	}
	return negcache.Pick(pos, neg, minStoredAt)
}

// store saves an entry; a store failure is recorded, never returned.
func (c *Coalescer) store(ctx context.Context, name string, e *entry.Entry, ttl time.Duration) bool {
	if !c.o.Health.Allow() {
		return false
	}
	err := c.o.Store.Set(ctx, name, e, ttl)
	if errors.Is(err, entry.ErrNotCacheable) {
		return false
	}
	c.o.Health.Record(err)
	return err == nil
}

// failedTransiently reports a call that got no answer worth passing on
// because the upstream is in trouble: a 429 or 5xx not stored, or a
// Transient error.
func (c *Coalescer) failedTransiently(out Outcome, err error) bool {
	if err != nil {
		return c.o.Transient != nil && c.o.Transient(err)
	}
	return out.Entry != nil && !out.Stored &&
		(out.Entry.Status == 429 || out.Entry.Status >= 500)
}

// staleIfError is the entry to answer instead of a transient failure:
// the prompt's positive entry when it is within a stale window and the
// request takes stale answers (not no-cache, max-age or a refresh).
func (c *Coalescer) staleIfError(ctx context.Context, req *Request, k keys) *entry.Entry {
	if req.NoCache || req.Refresh || !req.MinStoredAt.IsZero() || max(req.StaleWhileRevalidate, req.StaleIfError) <= 0 {
		return nil
	}
	es := c.read(ctx, k.entry, k.negative)
	if es == nil || es[0] == nil {
		return nil
	}
	switch entry.Classify(es[0], c.o.Now(), req.StaleWhileRevalidate, req.StaleIfError) {
	case entry.StaleRevalidate, entry.StaleIfError:
		return es[0]
	}
	return nil
}

// forget removes an entry; a store failure is recorded, never returned.
func (c *Coalescer) forget(ctx context.Context, name string) {
	if !c.o.Health.Allow() {
		return
	}
	c.o.Health.Record(c.o.Store.Delete(ctx, name))
}

// keys are the Redis names that hang off one prompt.
type keys struct {
	entry, negative, lock, stream, failure string
}

func names(req *Request) keys {
	return keys{
		entry:    keying.Name(req.Tenant, req.Hash, keying.Response),
		negative: negcache.Key(req.Tenant, req.Hash),
		lock:     keying.Name(req.Tenant, req.Hash, keying.Lock),
		stream:   keying.Name(req.Tenant, req.Hash, keying.Stream),
		failure:  keying.Name(req.Tenant, req.Hash, keying.Failure),
	}
}

// failure is the answer a transient failure gives the waiters of its
// leader: a passed-through 429 or 5xx as it came, an error as Render
// renders it; nil when the call did not fail transiently or cannot be
// rendered.
func (c *Coalescer) failure(req *Request, out Outcome, err error) *entry.Entry {
	if !c.failedTransiently(out, err) {
		return nil
	}
	if err == nil {
		return out.Entry
	}
	if c.o.Render == nil {
		return nil
	}
	return c.o.Render(req, err)
}

// Join joins the flight for the tenant's prompt hash, starting it with the
// request build returns when none is running. Every caller must Leave.
func (c *Coalescer) Join(tenant, hash string, build func() *Request) *Flight {
	g := c.groupFor(tenant)
	f, leader := g.Join(hash, func() (*state, flight.Work) {
		st := &state{rec: flight.NewRecord(), streaming: make(chan struct{}), relayed: make(chan struct{})}
		req := build()
		if req.Span != nil {
			st.span = req.Span.SpanContext()
		}
		c.running.Add(1) // under the group's lock, before the work starts
		return st, func(ctx context.Context) error {
			defer c.running.Done()
			defer st.rec.Close(errFlightEnded) // a no-op when the stream ended properly
			out, err := c.run(ctx, req, st)
			st.out = out // read by waiters only after the flight is done
			return err
		}
	})
	return &Flight{f: f, leader: leader}
}

// GroupStats is what a tenant's flight group tells about itself.
type GroupStats interface {
	Len() int // flights in progress
	Stats() flight.Stats
}

// Group is the tenant's flight group, for stats.
func (c *Coalescer) Group(tenant string) GroupStats { return c.groupFor(tenant) }

// InFlight is how many flights are in progress on this instance, over
// every tenant: a moment's view for the console.
func (c *Coalescer) InFlight() int {
	n := 0
	c.groups.Range(func(_, g any) bool {
		n += g.(*group).Len()
		return true
	})
	return n
}

func (c *Coalescer) groupFor(id string) *group {
	if g, ok := c.groups.Load(id); ok {
		return g.(*group)
	}
	g, _ := c.groups.LoadOrStore(id, new(group))
	return g.(*group)
}

// Wait waits for flights still running after their clients left (a
// distributed leader finishes its call for waiters elsewhere), so a
// shutdown stores their answers and releases their locks before the Redis
// client closes. It gives up when ctx ends.
func (c *Coalescer) Wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		c.running.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// state is shared by everyone in a flight. rec, streaming and relayed are
// usable at once; header and mirrored are set before streaming is closed;
// streamed before rec ends cleanly; out before the flight is done.
type state struct {
	rec       *flight.Record
	streaming chan struct{}
	relayed   chan struct{} // closed by the first Relayed
	relayOnce sync.Once     // closes relayed once
	header    map[string][]string
	mirrored  bool // the stream is another instance's
	streamed  Outcome
	out       Outcome
	span      trace.SpanContext // the leader request's flight span, set before anyone joins
}

// Flight is one caller's membership of a flight.
type Flight struct {
	f      *flight.Flight[*state]
	leader bool
}

// Leader reports that this caller started the flight.
func (f *Flight) Leader() bool { return f.leader }

// Streaming is closed when the answer is an event stream being relayed
// (the upstream's, or another instance's live stream).
func (f *Flight) Streaming() <-chan struct{} { return f.f.Value().streaming }

// IsStreaming reports that Streaming is closed, without waiting.
func (f *Flight) IsStreaming() bool { return closed(f.f.Value().streaming) }

// Ended reports that Done is closed, without waiting.
func (f *Flight) Ended() bool { return closed(f.f.Done()) }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
	default:
		return false
	}
	return true
}

// LeaderSpan is the flight span of the request that started the flight
// (invalid when it was not traced), for a follower's link.
func (f *Flight) LeaderSpan() trace.SpanContext { return f.f.Value().span }

// Header is the stream's response header; valid once Streaming is closed.
func (f *Flight) Header() map[string][]string { return f.f.Value().header }

// Cursor reads the stream from its first event, then live; valid once
// Streaming is closed. It ends with io.EOF when the stream ended cleanly.
func (f *Flight) Cursor() *flight.Cursor { return f.f.Value().rec.Cursor() }

// Relayed tells the flight that this caller has written the stream's
// first events to its client, or will write none (it left, or it waits
// for the whole answer). The leader's publisher sends the live stream to
// the other instances only after the first Relayed when its request
// Relays (or once the stream moves on: see awaitRelayed), so that on a
// busy instance the leader's first byte does not queue behind the first
// XADD: the client is written first, Redis after. Safe to call more than
// once and from any member.
func (f *Flight) Relayed() {
	st := f.f.Value()
	st.relayOnce.Do(func() { close(st.relayed) })
}

// Streamed is the outcome of a stream that ended cleanly; valid once a
// Cursor returned io.EOF. It travels with the record's end so that a
// follower has it as soon as it has the last event, before the flight has
// released its lock.
func (f *Flight) Streamed() Outcome { return f.f.Value().streamed }

// StreamSource is what the stream is to this caller: the leader's own
// call, or another's (a follower here, or a mirror of another instance).
func (f *Flight) StreamSource() Source {
	if f.leader && !f.f.Value().mirrored {
		return Miss
	}
	return Coalesced
}

// Done is closed when the flight has ended.
func (f *Flight) Done() <-chan struct{} { return f.f.Done() }

// Result is the flight's outcome and error; valid once Done is closed. A
// panicking flight's error is a *flight.PanicError.
func (f *Flight) Result() (Outcome, error) { return f.f.Value().out, f.f.Err() }

// Source is what an outcome of this flight is to this caller: the
// leader's own; to a follower, a stored answer the flight found, or else
// another request's call.
func (f *Flight) Source(o Outcome) Source {
	if f.leader || o.Source == Hit || o.Source == Negative || o.Source == Stale {
		return o.Source
	}
	return Coalesced
}

// Leave ends this caller's wait; the last to leave cancels the flight.
func (f *Flight) Leave() { f.f.Leave() }

type nopObserver struct{}

func (nopObserver) Called(*Request, Outcome, error, time.Duration) {}
func (nopObserver) TookOver()                                      {}

type alwaysHealthy struct{}

func (alwaysHealthy) Allow() bool  { return true }
func (alwaysHealthy) Record(error) {}
