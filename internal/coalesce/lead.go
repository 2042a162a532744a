package coalesce

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/telemetry"
)

// run is a flight's work: become the one leader across instances (or
// follow the one that is), double-check the cache, admit, call upstream,
// classify, store, tell the other instances. It runs on the flight's
// detached context and returns the flight's answer.
func (c *Coalescer) run(ctx context.Context, req *Request, st *state) (Outcome, error) {
	if c.o.Locker != nil {
		// Waiters on other instances may depend on this flight, unseen
		// here: it runs to its end (each step has its own timeout) even
		// when every local waiter has left.
		ctx = context.WithoutCancel(ctx)
	}
	if req.Span != nil {
		ctx = trace.ContextWithSpan(ctx, req.Span) // the flight's steps are the leader's flight span's children
	}
	// Stop ends every flight at once, with ErrShutdown as its cause.
	ctx, end := context.WithCancelCause(ctx)
	defer end(nil)
	unstop := context.AfterFunc(c.stop, func() { end(ErrShutdown) })
	defer unstop()
	k := names(req)
	l, err := c.lead(ctx, req, k, st)
	if l.failed {
		// The leader waited for failed transiently: its waiters' answer,
		// or the entry within a stale window, as the leader's clients get.
		if e := c.staleIfError(ctx, req, k); e != nil {
			return Outcome{Entry: e, Source: Stale}, nil
		}
	}
	if l.done {
		return l.out, err
	}
	publish := l.release != nil && c.o.Streams != nil
	if l.release != nil {
		defer func() {
			// A fresh context: the flight's may be cancelled, and a lock
			// left behind would stall every waiter for a whole TTL.
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			if publish && errors.Is(context.Cause(ctx), ErrShutdown) {
				// Its end marker says it broke; an instance that stops
				// leaves nothing of its own behind for a TTL.
				c.o.Health.Record(c.o.Streams.Drop(rctx, k.stream))
			}
			c.o.Health.Record(l.release(rctx))
			if c.o.Bus != nil {
				c.o.Health.Record(c.o.Bus.Publish(rctx, k.entry))
			}
		}()
	}

	// Double-check: another flight (here or elsewhere) may have stored the
	// answer between our lookup and becoming leader. A no-cache leader
	// skipped the lookup on purpose and wants the upstream's answer, unless
	// it waited for another instance's leader, whose answer is fresh.
	if (!req.NoCache || l.waited) && !l.checked {
		if e, neg := c.lookup(ctx, k.entry, k.negative, req.MinStoredAt); e != nil {
			return Outcome{Entry: e, Source: storedSource(neg, false)}, nil
		}
	}

	// Tokens/min is charged only by requests that go upstream: hits and
	// followers cost no tokens.
	if req.Tokens != nil {
		if err := req.Tokens.Take(ctx); err != nil {
			return Outcome{}, err
		}
	}

	// The leader semaphore bounds this tenant's concurrent upstream calls
	// on this instance; it is held only for the call itself.
	wctx, cancel := context.WithTimeout(ctx, c.o.LeaderWait)
	err = req.Leaders.Acquire(wctx, 1)
	cancel()
	if err != nil {
		// What Take reserved for a call that will not happen goes back
		// (a budget reservation), where the Tokens can give it back.
		if rel, ok := req.Tokens.(interface{ Release(context.Context) }); ok {
			rel.Release(ctx)
		}
		if ctx.Err() != nil {
			return Outcome{}, context.Cause(ctx)
		}
		return Outcome{}, &ConcurrencyError{Max: req.MaxLeaders}
	}
	defer req.Leaders.Release(1)

	start := time.Now()
	out, err := c.call(ctx, req, k, st, publish)
	out.Source, out.Upstream = Miss, time.Since(start)
	c.o.Observer.Called(req, out, err, out.Upstream)
	if l.release != nil {
		// Before the lock is released (deferred above): a waiter that
		// finds the lock gone finds the failure with it, and answers with
		// it instead of calling an upstream that just failed.
		if e := c.failure(req, out, err); e != nil {
			c.store(context.WithoutCancel(ctx), k.failure, e, c.o.FailureTTL)
		}
	}
	// stale-if-error: a failure the upstream will get over is answered
	// with the old entry, to this flight's every waiter. A stream that
	// has begun is the clients' already.
	if !closed(st.streaming) && c.failedTransiently(out, err) {
		if e := c.staleIfError(ctx, req, k); e != nil {
			return Outcome{Entry: e, Source: Stale, Upstream: out.Upstream}, nil
		}
	}
	return out, err
}

// leadership is how lead ended.
type leadership struct {
	// release is the held lock; nil with done=false means lead without a
	// lock: embedded mode, Redis unreachable, or the wait timed out.
	release Release
	// done: out is the flight's answer (another instance's entry, or its
	// live stream mirrored into the record); no upstream call is made.
	done bool
	out  Outcome
	// waited: another instance led first.
	waited bool
	// checked: the lock was taken in the round trip that found no entry.
	checked bool
	// failed: with done, the leader waited for failed transiently and out
	// is its failure (Options.Render).
	failed bool
}

// lead makes this flight the leader across instances, or waits for the
// instance that is.
func (c *Coalescer) lead(ctx context.Context, req *Request, k keys, st *state) (l leadership, err error) {
	if c.o.Locker == nil {
		return l, nil
	}
	var wait trace.Span  // the wait for another instance's leader, once it begins
	result := "degraded" // how the wait ended, when there was one
	endWait := func() {
		if wait != nil {
			wait.SetAttributes(telemetry.LockResult.String(result))
			wait.End()
			wait = nil
		}
	}
	defer endWait()
	deadline := time.NewTimer(c.o.WaitTimeout)
	defer deadline.Stop()
	combined := c.readsWithLock(req)
	// Taking the lock deletes a previous leader's failure, so a failure
	// found once the lock is free is its last holder's, and its live
	// stream, so a stream present under a held lock is its holder's.
	clear := []string{k.failure}
	if c.o.Streams != nil {
		clear = append(clear, k.stream)
	}
	for {
		if !c.o.Health.Allow() {
			return l, nil // Redis is down: lead locally
		}
		var (
			release Release
			ok      bool
			looked  bool // the entries were read in the same round trip
		)
		switch {
		case combined:
			read := []string{k.entry, k.negative}
			if l.waited {
				read = append(read, k.failure)
			}
			var found []*entry.Entry
			release, ok, found, err = c.o.Locker.TryAcquireOrRead(ctx, k.lock, read, clear...)
			if err == nil {
				if e, neg := c.pickFound(found); e != nil {
					result = "answered"
					return leadership{done: true, waited: l.waited, out: Outcome{Entry: e, Source: storedSource(neg, l.waited)}}, nil
				}
				if len(found) > 2 && found[2] != nil {
					result = "leader_failed"
					return failedLeader(found[2]), nil
				}
				looked = true
				if !ok && slices.ContainsFunc(found, func(e *entry.Entry) bool { return e != nil }) {
					// The script saw a value (an entry past its TTL, kept
					// for the stale windows) and so did not take the lock:
					// take it on its own.
					release, ok, err = c.o.Locker.TryAcquire(ctx, k.lock, clear...)
				}
			}
		case l.waited:
			// A waiter that checks its entries itself (MinStoredAt) still
			// reads the failure with the lock.
			var found []*entry.Entry
			release, ok, found, err = c.o.Locker.TryAcquireOrRead(ctx, k.lock, []string{k.failure}, clear...)
			if err == nil && len(found) > 0 && found[0] != nil {
				result = "leader_failed"
				return failedLeader(found[0]), nil
			}
		default:
			release, ok, err = c.o.Locker.TryAcquire(ctx, k.lock, clear...)
		}
		c.o.Health.Record(err)
		if err != nil {
			// A lock Redis could not take is no leader anywhere: Redis is
			// down, hung past its deadline, or refusing writes (OOM under
			// maxmemory with noeviction, READONLY on a replica). Waiting
			// would wait out WaitTimeout for a lock this flight can never
			// get, while reads keep succeeding and the breaker never
			// trips; lead locally at once instead (one duplicate call at
			// worst, if another instance's leader was there all along).
			return l, nil
		}
		if ok {
			if l.waited {
				// The leader we waited for released or lost its lock
				// without an answer (it failed, or its instance died).
				c.o.Observer.TookOver()
				result = "took_over"
				if req.Span != nil {
					req.Span.SetAttributes(telemetry.FlightRole.String("leader"), telemetry.TookOver.Bool(true))
				}
			}
			l.release, l.checked = release, looked
			return l, nil
		}
		if req.Refresh {
			// Another flight holds the lock: it is the refresh (or a miss
			// that stores a new answer all the same).
			return leadership{done: true}, nil
		}
		if !l.waited {
			wait = c.startWait(ctx, req, k)
		}
		l.waited = true // another instance holds the lock
		// Watch before looking, so a "done" sent between the look and the
		// wait is not missed. A Redis error here is not a reason to lead:
		// a leader exists; keep waiting unless the breaker trips.
		ch, unwatch := c.watch(k.entry)
		if !looked {
			if e, _ := c.lookup(ctx, k.entry, k.negative, req.MinStoredAt); e != nil {
				unwatch()
				result = "answered"
				return leadership{done: true, waited: l.waited, out: Outcome{Entry: e, Source: Coalesced}}, nil
			}
		}
		if c.o.Streams != nil {
			// Follow a stream that is live or ended cleanly; an attempt
			// that already failed is not joined: its lock is about to go,
			// and then this flight leads a new one.
			if follow, ferr := c.o.Streams.Followable(ctx, k.stream); ferr == nil && follow {
				unwatch()
				result = "mirrored"
				endWait() // mirroring the stream is no longer waiting
				out, err := c.mirror(ctx, req, k, st)
				return leadership{done: true, waited: l.waited, out: out}, err
			}
		}
		poll := time.NewTimer(c.o.PollInterval)
		var stop bool
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			stop, result = true, "timeout"
			if c.o.FailOnWaitTimeout {
				l.done, err = true, ErrWaitTimeout
			}
		case <-ctx.Done():
			stop, l.done, err, result = true, true, context.Cause(ctx), "canceled"
		}
		unwatch()
		poll.Stop()
		if stop {
			return l, err
		}
	}
}

// startWait begins the span of a traced flight's wait for another
// instance's leader, marks the flight a follower and links both to the
// leader's span, which the lock's value carries (LeaderSpans). Reading it
// costs one more Redis round trip per wait, made only when traced. nil
// when the flight is not traced.
func (c *Coalescer) startWait(ctx context.Context, req *Request, k keys) trace.Span {
	if req.Span == nil || !req.Span.IsRecording() {
		return nil
	}
	req.Span.SetAttributes(telemetry.FlightRole.String("follower"))
	var opts []trace.SpanStartOption
	if ls, ok := c.o.Locker.(LeaderSpans); ok {
		// Read before the wait's span starts, so that whoever sees the
		// wait begin sees it linked.
		if sc, err := ls.HolderSpan(ctx, k.lock); err == nil && sc.IsValid() {
			link := trace.Link{SpanContext: sc}
			req.Span.AddLink(link)
			opts = append(opts, trace.WithLinks(link))
		}
	}
	_, span := c.o.Tracer.Start(ctx, telemetry.SpanLockWait, opts...)
	return span
}

// failedLeader is how a waiter's lead ends when the leader it waited for
// failed transiently: with that failure, coalesced, and no call of its own.
// Only waiters read the failure: a request that arrives after it is a new
// attempt (a transient failure is not remembered as an answer).
func failedLeader(e *entry.Entry) leadership {
	return leadership{done: true, waited: true, failed: true, out: Outcome{Entry: e, Source: Coalesced}}
}

// pickFound chooses from the entries read with the lock (response, then
// negative): the fresh response wins. The combined read is made only
// without a MinStoredAt (readsWithLock).
func (c *Coalescer) pickFound(found []*entry.Entry) (*entry.Entry, bool) {
	var pos, neg *entry.Entry
	if len(found) > 0 {
		pos = found[0]
	}
	if len(found) > 1 {
		neg = found[1]
	}
	return c.pick(pos, neg, time.Time{})
}

func (c *Coalescer) watch(name string) (<-chan struct{}, func()) {
	if c.o.Bus == nil {
		return nil, func() {}
	}
	return c.o.Bus.Watch(name)
}

// mirror follows another instance's live stream into this flight's
// record: one blocking reader per instance, fanned out to its local
// followers. A leader that dies mid-stream stops renewing its lock; when
// the lock lapses (or passes to a successor) and no end marker came, the
// followers' streams end with an error instead of hanging.
func (c *Coalescer) mirror(ctx context.Context, req *Request, k keys, st *state) (Outcome, error) {
	st.mirrored = true
	// The followers' header goes out with the first batch read, which
	// names the leader's upstream and its provider (X-Corral-Upstream and
	// X-Corral-Provider, as the leader's own clients get them); on every other way out it goes without.
	var once sync.Once
	begin := func(origin StreamOrigin) {
		once.Do(func() {
			st.header = map[string][]string{"Content-Type": {"text/event-stream"}}
			if origin.Upstream != "" {
				st.header[upstreamHeader] = []string{origin.Upstream}
			}
			if origin.Provider != "" {
				st.header[providerHeader] = []string{origin.Provider}
			}
			close(st.streaming)
		})
	}
	defer begin(StreamOrigin{})
	holder, _ := c.o.Locker.Holder(ctx, k.lock)
	// A blocking read may not return before its block time when ctx ends
	// (a socket read is not interrupted): the followers' streams end at
	// once all the same, with ctx's cause (Stop's ErrShutdown).
	defer context.AfterFunc(ctx, func() {
		begin(StreamOrigin{}) // before the first batch: the followers' streams start, to end at once
		st.rec.Close(context.Cause(ctx))
	})()
	block := max(c.o.LockTTL/4, 20*time.Millisecond)
	after := "0"
	var events [][]byte
	for {
		b, err := c.o.Streams.Read(ctx, k.stream, after, block)
		if ctx.Err() != nil {
			st.rec.Close(context.Cause(ctx))
			return Outcome{}, context.Cause(ctx)
		}
		c.o.Health.Record(err)
		if len(b.Events) > 0 || b.Ended {
			begin(StreamOrigin{Upstream: b.Upstream, Provider: b.Provider})
		}
		for _, ev := range b.Events {
			st.rec.Append(ev)
			events = append(events, ev)
		}
		after = b.Next
		switch {
		case b.Ended && b.Err != nil:
			st.rec.Close(b.Err)
			return Outcome{}, &StreamError{Err: b.Err}
		case b.Ended:
			// The followers have the whole stream, whether or not an
			// answer can be made of it.
			out, err := c.mirroredAnswer(ctx, req, k, events)
			st.endStream(out)
			return out, err
		case err != nil && !c.o.Health.Allow(), len(b.Events) == 0 && !c.leaderAlive(ctx, k, holder):
			// The leader may have finished and stored its answer but
			// failed to write the end marker: look before failing.
			if e, _ := c.lookup(ctx, k.entry, k.negative, time.Time{}); e != nil {
				out := Outcome{Entry: e, Source: Coalesced}
				switch {
				case len(events) > 0 && req.Format.IsEnd(events[len(events)-1]):
					// Every event was read; only the end marker is missing.
					st.endStream(out)
					return out, nil
				case len(events) == 0:
					// Nothing was relayed yet: the followers are answered
					// from the entry, each as its own request asks, not
					// from a stream, which therefore never begins.
					once.Do(func() {})
					return out, nil
				}
				// Some events are missing and cannot be spliced with the
				// entry's: the followers' streams end with an error.
			}
			st.rec.Close(ErrLeaderGone)
			return Outcome{}, &StreamError{Err: ErrLeaderGone}
		case err != nil:
			// A Redis hiccup: pause as long as a poll before reading again.
			t := time.NewTimer(c.o.PollInterval)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

// mirroredAnswer is the answer when the leader's stream ended cleanly: the
// entry it stored before its end marker, or the answer rebuilt from the
// events when storing failed.
func (c *Coalescer) mirroredAnswer(ctx context.Context, req *Request, k keys, events [][]byte) (Outcome, error) {
	out := Outcome{Source: Coalesced}
	if e, _ := c.lookup(ctx, k.entry, k.negative, time.Time{}); e != nil {
		out.Entry = e
		return out, nil
	}
	asm := req.Format.NewAssembler(req.Endpoint)
	for _, ev := range events {
		asm.Add(ev)
	}
	body, u, err := asm.Finish()
	if err != nil {
		return out, &StreamError{Err: ErrStreamIncomplete}
	}
	out.Entry = answerEntry(body, u, nil)
	return out, nil
}

// leaderAlive reports whether the leader being mirrored still holds (and
// so renews) its lock: the same token as when mirroring began. A successor
// holding it is not our leader. An unanswered question counts as alive:
// the stream's own expiry bounds the wait.
func (c *Coalescer) leaderAlive(ctx context.Context, k keys, holder string) bool {
	now, err := c.o.Locker.Holder(ctx, k.lock)
	return err != nil || (now != "" && now == holder)
}

// endStream ends the record cleanly and hands the stream's outcome to its
// followers with that end.
func (st *state) endStream(out Outcome) {
	st.streamed = out
	st.rec.Close(nil)
}
