package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"runtime"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/livestream"
	"github.com/corralhq/corral/internal/coalesce/redislock"
	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

// Locker is the cross-instance leader lock (coalesce/redislock in
// distributed mode). Only one holder per name at a time, across instances.
type Locker interface {
	// TryAcquire takes name if nobody holds it. ok=false means another
	// holds it; err is a Redis failure.
	TryAcquire(ctx context.Context, name string) (lease Lease, ok bool, err error)
	// Holder returns the token of whoever holds name, "" when nobody does.
	Holder(ctx context.Context, name string) (string, error)
}

// Lease is a held lock; the implementation renews it until Release.
type Lease interface {
	Release(ctx context.Context) error
}

// Bus carries "done" notices between instances.
type Bus interface {
	// Watch returns a channel that is closed when name is announced done;
	// cancel must be called when the watcher stops.
	Watch(name string) (ch <-chan struct{}, cancel func())
	Publish(ctx context.Context, name string) error
}

// maxUpstreamBody bounds a non-streamed upstream answer Corral buffers.
const maxUpstreamBody = 64 << 20

// flightParams is what the leader's request contributes to a flight.
type flightParams struct {
	t           *tenant.Tenant
	endpoint    string
	name        string // response entry key
	negName     string // negative entry key
	lockName    string
	streamName  string // the live stream followers on other instances read
	publish     bool   // this flight leads across instances and publishes its stream
	spliced     bool   // Corral added stream_options to the body
	original    []byte // the client's body, before any splice
	checked     bool   // the lock was taken in the same round trip that found no entry
	body        []byte
	header      http.Header   // the leader's request headers, cloned
	ttl         time.Duration // positive TTL
	negTTL      time.Duration // negative TTL
	minStoredAt time.Time
	noCache     bool // the leader asked for a fresh upstream answer
	estimate    int  // tokens/min charged before the call
	model       string
}

// flightState is shared by everyone in a flight. rec and streaming are
// usable at once; header is set before streaming is closed; res before the
// flight is done.
type flightState struct {
	rec       *coalesce.Record
	streaming chan struct{}     // closed when the upstream answered 200 with an event stream
	header    http.Header       // the upstream's response headers, filtered
	tokens    *ratelimit.Result // the leader's tokens/min decision, set before streaming or done
	mirrored  bool              // the stream is another instance's, set before streaming is closed
	res       flightResult
}

// flightResult is a flight's outcome.
type flightResult struct {
	entry  *cache.Entry // the answer (200 or an upstream error passed through)
	source string       // cacheMiss: this flight called upstream; cacheHit: found on the double-check; cacheCoalesced: another instance's answer
	stored bool
	fail   *apiError // a failure Corral answers for (timeout, connect, auth, concurrency)
	// upstream is how long the upstream call took (0 when none was made).
	upstream time.Duration
}

type flightGroup = coalesce.Group[*flightState]

// groupFor returns the tenant's flight group: one per tenant, so one
// tenant's key space never contends with another's lock.
func (s *Server) groupFor(id string) *flightGroup {
	if g, ok := s.groups.Load(id); ok {
		return g.(*flightGroup)
	}
	g, _ := s.groups.LoadOrStore(id, new(flightGroup))
	return g.(*flightGroup)
}

// runFlight is a flight's work: become the one leader across instances (or
// wait for it), double-check the cache, call upstream, classify, store,
// tell the other instances. It runs on the flight's detached context.
func (s *Server) runFlight(ctx context.Context, p *flightParams, st *flightState) error {
	defer st.rec.Close(errFlightEnded) // no-op when the stream was closed properly

	if s.locker != nil {
		// Waiters on other instances may depend on this flight, unseen
		// here: it runs to its end (each step has its own timeout) even
		// when every local waiter has left.
		ctx = context.WithoutCancel(ctx)
	}
	var err error
	lease, waited, res, done := s.lead(ctx, p, st)
	if done {
		if !st.mirrored { // a mirror set st.res before closing its record
			st.res = res
		}
		return ctx.Err()
	}
	p.publish = lease != nil && s.streams != nil
	if lease != nil {
		defer func() {
			// A fresh context: the flight's may be cancelled, and a lock
			// left behind would stall every waiter for a whole TTL.
			rctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			s.redis.record(lease.Release(rctx))
			if s.bus != nil {
				s.redis.record(s.bus.Publish(rctx, p.name))
			}
		}()
	}

	// Double-check: another flight (here or elsewhere) may have stored the
	// answer between our lookup and becoming leader. A no-cache leader
	// skipped the lookup on purpose and wants the upstream's answer, unless
	// it waited for another instance's leader, whose answer is fresh.
	if (!p.noCache || waited) && !p.checked {
		if e, neg, _ := s.lookup(ctx, p.name, p.negName, p.minStoredAt); e != nil {
			st.res = flightResult{entry: e, source: cacheHit}
			if neg {
				st.res.source = cacheNegative
			}
			return nil
		}
	}

	// Tokens/min is charged only by requests that go upstream: hits and
	// followers cost no tokens.
	if p.t.TokensPerMinute > 0 {
		res, aerr := s.takeTokens(ctx, p.t, ratelimit.Tokens, p.t.TokensPerMinute, p.estimate)
		st.tokens = &res
		if aerr != nil {
			st.res.fail = aerr
			return nil
		}
	}

	// The leader semaphore bounds this tenant's concurrent upstream calls
	// on this instance; it is held only for the call itself.
	wctx, cancel := context.WithTimeout(ctx, s.leaderWait)
	err = p.t.Leaders.Acquire(wctx, 1)
	cancel()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.res.fail = errConcurrency(p.t.MaxLeaders)
		return nil
	}
	defer p.t.Leaders.Release(1)

	st.res.source = cacheMiss
	start := time.Now()
	err = s.callUpstream(ctx, p, st)
	st.res.upstream = time.Since(start)
	s.recordCall(ctx, p, st, st.res.upstream)
	return err
}

// recordCall counts one upstream call in metrics and usage, by outcome.
func (s *Server) recordCall(ctx context.Context, p *flightParams, st *flightState, d time.Duration) {
	outcome := "canceled"
	var prompt, completion int
	switch {
	case st.res.fail == errUpstreamAuth:
		outcome = negcache.UpstreamAuth.String()
	case st.res.fail != nil && st.res.fail.Code == errUpstreamTimeout.Code:
		outcome = "timeout"
	case st.res.fail != nil:
		outcome = "error"
	case st.res.entry != nil:
		outcome = negcache.Classify(st.res.entry.Status).String()
		prompt, completion = st.res.entry.PromptTokens, st.res.entry.CompletionTokens
	case ctx.Err() == nil:
		outcome = "error"
	}
	s.metrics.Upstream(p.t.ID, p.model, outcome, d)
	s.metrics.Tokens(p.t.ID, p.model, prompt, completion)
	s.usage.Add(p.t.ID, usage.Counters{UpstreamCalls: 1, TokensUsed: int64(prompt + completion)})
}

// callUpstream makes the flight's one upstream call, then classifies and
// stores its answer.
func (s *Server) callUpstream(ctx context.Context, p *flightParams, st *flightState) error {
	resp, err := s.up.Do(ctx, upstream.Request{Method: http.MethodPost, Path: p.endpoint, Header: p.header, Body: p.body})
	if err == nil && p.spliced && resp.StatusCode == http.StatusBadRequest {
		// Some OpenAI-compatible servers reject stream_options. If ours
		// did, send the client's own body instead, and stop adding it.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody))
		resp.Body.Close()
		if bytes.Contains(body, []byte("stream_options")) {
			s.noSplice.Store(true)
			s.log.Warn("the upstream rejects stream_options; streaming answers will be stored without usage")
			p.body, p.spliced = p.original, false
			resp, err = s.up.Do(ctx, upstream.Request{Method: http.MethodPost, Path: p.endpoint, Header: p.header, Body: p.body})
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(body)) // another 400: answer it as it came
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.res.fail = upstreamFailure(err)
		return nil
	}
	defer resp.Body.Close()

	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		st.res.fail = errUpstreamAuth
		return nil
	case resp.StatusCode == http.StatusOK && isEventStream(resp.Header):
		return s.streamFlight(ctx, p, st, resp)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxUpstreamBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		st.res.fail = upstreamFailure(err)
		return nil
	}
	if len(body) > maxUpstreamBody {
		st.res.fail = errUpstreamTooLarge
		return nil
	}
	e := &cache.Entry{Status: resp.StatusCode, Header: cache.KeepHeaders(resp.Header), Body: body}
	if resp.StatusCode != http.StatusOK {
		// Passed through, not stored: keep what helps the client, such as
		// Retry-After on a 429.
		e.Header = http.Header{}
		upstream.CopyResponseHeader(e.Header, resp.Header)
	}
	st.res.entry = e
	// Storing is detached from cancellation: the answer is whole and paid for.
	sctx := context.WithoutCancel(ctx)
	switch class := negcache.ClassifyResponse(resp.StatusCode, body); {
	case !json.Valid(body):
		// Not an OpenAI answer (an HTML error page, an event stream sent
		// as the wrong type): passed through, never stored.
	case class == negcache.Answer:
		e.PromptTokens, e.CompletionTokens = usageOf(body)
		s.chargeActual(sctx, p.t, p.estimate, e.PromptTokens+e.CompletionTokens)
		st.res.stored = s.store(sctx, p.name, e, p.ttl)
	case class == negcache.Deterministic && !(p.spliced && resp.StatusCode == http.StatusBadRequest):
		// An invalid-request failure to a body Corral changed (the
		// stream_options splice) might be the change's fault; it is never
		// remembered under the key the unchanged request shares.
		e.Header = cache.KeepHeaders(resp.Header)
		st.res.stored = s.store(sctx, p.negName, e, p.negTTL)
	}
	return nil
}

// errFlightEnded closes a stream record that its flight abandoned.
var errFlightEnded = errors.New("flight ended before the stream completed")

// lead makes this flight the leader across instances, or waits for the
// instance that is. done=true means res is the flight's answer and no
// upstream call is to be made (the other instance's entry, or its live
// stream mirrored into st). A nil lease with done=false means lead without
// a lock: embedded mode, Redis unreachable, or the wait timed out.
// waited reports that another instance led first.
func (s *Server) lead(ctx context.Context, p *flightParams, st *flightState) (lease Lease, waited bool, res flightResult, done bool) {
	if s.locker == nil {
		return nil, false, res, false
	}
	deadline := time.NewTimer(s.waitTimeout)
	defer deadline.Stop()
	rl, combined := s.locker.(ReadingLocker)
	combined = combined && p.minStoredAt.IsZero() // fresher-than demands read the entries themselves
	for {
		if !s.redis.allow() {
			return nil, waited, res, false // Redis is down: lead locally
		}
		var (
			l      Lease
			ok     bool
			err    error
			looked bool // the entries were read in the same round trip
		)
		if combined {
			var vals [][]byte
			l, ok, vals, err = rl.TryAcquireOrRead(ctx, p.lockName, []string{p.name, p.negName}, s.streamLeftovers(p)...)
			e, neg, undecodable := pickStored(vals)
			if e != nil {
				source := cacheCoalesced
				switch {
				case waited:
				case neg:
					source = cacheNegative
				default:
					source = cacheHit
				}
				return nil, waited, flightResult{entry: e, source: source}, true
			}
			looked = err == nil
			if undecodable && err == nil {
				// An unreadable value is a miss; take the lock the plain way.
				l, ok, err = s.acquirePlain(ctx, p)
			}
		} else {
			l, ok, err = s.acquirePlain(ctx, p)
		}
		s.redis.record(err)
		if err != nil && !s.redis.healthy() {
			return nil, waited, res, false // a failed probe leads locally, not another probe
		}
		if ok {
			if waited {
				// The leader we waited for released or lost its lock
				// without an answer (it failed, or its instance died).
				s.metrics.LockTakeover()
			}
			p.checked = looked
			return l, waited, res, false
		}
		if err == nil {
			waited = true // another instance holds the lock
		}
		// Watch before looking, so a "done" sent between the look and the
		// wait is not missed. A Redis error here is not a reason to lead:
		// a leader exists; keep waiting unless the breaker trips.
		ch, unwatch := s.watch(p.name)
		if !looked {
			if e, _, _ := s.lookup(ctx, p.name, p.negName, p.minStoredAt); e != nil {
				unwatch()
				return nil, waited, flightResult{entry: e, source: cacheCoalesced}, true
			}
		}
		if s.streams != nil {
			// Follow a stream that is live or ended cleanly; an attempt
			// that already failed is not joined: its lock is about to go,
			// and then this flight leads a new one.
			if state, err := s.streams.Peek(ctx, p.streamName); err == nil && (state == livestream.Live || state == livestream.Done) {
				unwatch()
				return nil, waited, s.mirror(ctx, p, st), true
			}
		}
		poll := time.NewTimer(s.pollInterval)
		var stop bool
		select {
		case <-ch:
		case <-poll.C:
		case <-deadline.C:
			stop = true
			if s.failOnWaitTimeout {
				res, done = flightResult{fail: errWaitTimeout}, true
			}
		case <-ctx.Done():
			stop, done = true, true
		}
		unwatch()
		poll.Stop()
		if stop {
			return nil, waited, res, done
		}
	}
}

// mirror follows another instance's live stream into this flight's
// record: one blocking reader per instance, fanned out to its local
// followers. A leader that dies mid-stream stops renewing its lock; when
// the lock lapses (or passes to a successor) and no end marker came, the
// followers' streams end with an error instead of hanging. The result is
// set in st.res before the record closes, so followers that saw the end
// may read it.
func (s *Server) mirror(ctx context.Context, p *flightParams, st *flightState) flightResult {
	st.header = http.Header{"Content-Type": {"text/event-stream"}}
	st.mirrored = true
	close(st.streaming)
	holder, _ := s.locker.Holder(ctx, p.lockName)
	finish := func(res flightResult, cause error) flightResult {
		st.res = res
		st.rec.Close(cause)
		return res
	}
	block := max(s.lockTTL/4, 20*time.Millisecond)
	after := "0"
	var events [][]byte
	for {
		b, err := s.streams.Read(ctx, p.streamName, after, block)
		if ctx.Err() != nil {
			return finish(flightResult{}, ctx.Err())
		}
		s.redis.record(err)
		for _, ev := range b.Events {
			st.rec.Append(ev)
			events = append(events, ev)
		}
		after = b.Next
		switch {
		case b.Ended && b.Err != nil:
			return finish(flightResult{fail: streamFailure(b.Err)}, b.Err)
		case b.Ended:
			return finish(s.mirroredAnswer(ctx, p, events), nil)
		case err != nil && !s.redis.allow(), len(b.Events) == 0 && !s.leaderAlive(ctx, p, holder):
			// The leader may have finished and stored its answer but
			// failed to write the end marker: look before failing.
			if e, _, _ := s.lookup(ctx, p.name, p.negName, time.Time{}); e != nil {
				return finish(flightResult{entry: e, source: cacheCoalesced}, nil)
			}
			return finish(flightResult{fail: streamFailure(errLeaderGone)}, errLeaderGone)
		case err != nil:
			// A Redis hiccup: pause as long as a poll before reading again.
			t := time.NewTimer(s.pollInterval)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
	}
}

// mirroredAnswer is the flight's answer when the leader's stream ended
// cleanly: the entry it stored before its end marker, or the completion
// rebuilt from the events when storing failed.
func (s *Server) mirroredAnswer(ctx context.Context, p *flightParams, events [][]byte) flightResult {
	res := flightResult{source: cacheCoalesced}
	if e, _, _ := s.lookup(ctx, p.name, p.negName, time.Time{}); e != nil {
		res.entry = e
	} else if e := assembleEvents(p.endpoint, events); e != nil {
		res.entry = e
	} else {
		res.fail = streamFailure(errStreamIncomplete)
	}
	return res
}

// errLeaderGone ends followers' streams whose leader stopped renewing its
// lock before finishing.
var errLeaderGone = errors.New("the instance streaming this answer stopped before finishing")

// leaderAlive reports whether the leader being mirrored still holds (and
// so renews) its lock: the same token as when mirroring began. A successor
// holding it is not our leader. An unanswered question counts as alive:
// the stream's own expiry bounds the wait.
func (s *Server) leaderAlive(ctx context.Context, p *flightParams, holder string) bool {
	now, err := s.locker.Holder(ctx, p.lockName)
	return err != nil || (now != "" && now == holder)
}

// assembleEvents rebuilds a completion from relayed SSE events, or nil.
func assembleEvents(endpoint string, events [][]byte) *cache.Entry {
	asm := upstream.NewAssembler(endpoint)
	for _, ev := range events {
		if asm.Add(upstream.Data(ev)) != nil {
			return nil
		}
	}
	if !asm.Complete() {
		return nil
	}
	body, err := asm.Body()
	if err != nil {
		return nil
	}
	e := &cache.Entry{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	e.PromptTokens, e.CompletionTokens, _ = asm.Usage()
	return e
}

// publish copies the flight's record into the Redis live stream for
// followers on other instances, batch by batch, and marks its end. It is a
// cursor like any follower's, so it never slows the leader. The first
// batch also wakes the other instances' waiters, which then find the
// stream. It returns when the record has ended and the end is written.
func (s *Server) publish(ctx context.Context, p *flightParams, rec *coalesce.Record) {
	ctx = context.WithoutCancel(ctx)
	cur := rec.Cursor()
	announced, first := false, true
	for {
		batch, err := cur.Next(ctx)
		if err != nil {
			var cause error
			if !errors.Is(err, io.EOF) {
				cause = err
			}
			s.redis.record(s.streams.End(ctx, p.streamName, cause))
			return
		}
		if first {
			first = false
			// Let the local clients' relays write the first event before
			// this cursor's Redis round trip takes the core: on a busy
			// instance that was a measurable share of the leader's time to
			// first byte.
			runtime.Gosched()
		}
		if err := s.streams.Append(ctx, p.streamName, batch); err != nil {
			s.redis.record(err)
			continue // the followers will notice the gap through the lock
		}
		if !announced && s.bus != nil {
			announced = true
			s.redis.record(s.bus.Publish(ctx, p.name))
		}
	}
}

// streamLeftovers is what taking the lock deletes: a previous leader's
// live stream, so a stream present under a held lock is its holder's.
func (s *Server) streamLeftovers(p *flightParams) []string {
	if s.streams == nil {
		return nil
	}
	return []string{p.streamName}
}

// acquirePlain takes the lock with SET NX and, once taken, deletes a
// previous leader's live stream.
func (s *Server) acquirePlain(ctx context.Context, p *flightParams) (Lease, bool, error) {
	l, ok, err := s.locker.TryAcquire(ctx, p.lockName)
	if ok && s.streams != nil {
		s.redis.record(s.streams.Clear(ctx, p.streamName))
	}
	return l, ok, err
}

func (s *Server) watch(name string) (<-chan struct{}, func()) {
	if s.bus == nil {
		return nil, func() {}
	}
	return s.bus.Watch(name)
}

// lookup reads a prompt's positive and negative entries in one round trip
// and returns the one to serve: the positive entry
// wins; negative reports that e is a remembered failure. Entries older
// than minStoredAt are ignored. A miss is (nil, false, nil); a store
// failure is returned but never fails the request.
func (s *Server) lookup(ctx context.Context, name, negName string, minStoredAt time.Time) (e *cache.Entry, negative bool, err error) {
	if !s.redis.allow() {
		return nil, false, nil
	}
	es, err := s.cache.GetMany(ctx, name, negName)
	s.redis.record(err)
	if err != nil {
		return nil, false, err
	}
	pos, neg := es[0], es[1]
	switch {
	case pos != nil && !pos.StoredAt.Before(minStoredAt):
		return pos, false, nil
	case neg != nil && !neg.StoredAt.Before(minStoredAt):
		return neg, true, nil
	}
	return nil, false, nil
}

// store saves an entry; a store failure is recorded, never returned.
func (s *Server) store(ctx context.Context, name string, e *cache.Entry, ttl time.Duration) bool {
	if !s.redis.allow() {
		return false
	}
	err := s.cache.Set(ctx, name, e, ttl)
	if errors.Is(err, cache.ErrNotCacheable) {
		return false
	}
	s.redis.record(err)
	return err == nil
}

// streamFlight relays an upstream event stream into the flight's record
// while assembling the completion, and stores it only if it ended
// cleanly.
func (s *Server) streamFlight(ctx context.Context, p *flightParams, st *flightState, resp *http.Response) error {
	st.header = http.Header{}
	upstream.CopyResponseHeader(st.header, resp.Header)
	close(st.streaming)
	if p.publish {
		published := make(chan struct{})
		go func() {
			defer close(published)
			s.publish(ctx, p, st.rec)
		}()
		// The end marker must be written before the lock is released, so
		// followers never mistake a finished leader for a dead one.
		defer func() {
			st.rec.Close(errFlightEnded)
			<-published
		}()
	}

	asm := upstream.NewAssembler(p.endpoint)
	storable := true
	er := upstream.NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if err != nil {
			if ctx.Err() != nil {
				st.rec.Close(ctx.Err())
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				err = errStreamIncomplete // the body ended without [DONE]
			}
			st.rec.Close(err)
			st.res.fail = streamFailure(err)
			return nil
		}
		data := upstream.Data(ev)
		if upstream.IsDone(data) {
			s.finishStream(ctx, p, st, asm, storable)
			st.rec.Append(bytes.Clone(ev))
			st.rec.Close(nil)
			// Drain what little may follow so the connection is reused.
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			return nil
		}
		st.rec.Append(bytes.Clone(ev))
		if len(data) > 0 && storable && asm.Add(data) != nil {
			storable = false // e.g. an error event mid-stream: relay it, never store it
		}
	}
}

// errUpstreamTooLarge answers an upstream body over maxUpstreamBody.
var errUpstreamTooLarge = &apiError{Status: http.StatusBadGateway, Type: typeServer, Code: "upstream_error",
	Message: "The upstream answer was larger than the gateway accepts."}

// errStreamIncomplete is a stream that ended without [DONE].
var errStreamIncomplete = errors.New("upstream stream ended before it was complete")

// finishStream assembles and stores a stream that reached [DONE]. It runs
// before [DONE] is relayed, so a client that saw the end and asks again at
// once finds the entry; and it stores even if every client has just left,
// because the answer is whole and already paid for.
func (s *Server) finishStream(ctx context.Context, p *flightParams, st *flightState, asm *upstream.Assembler, storable bool) {
	if asm.Add([]byte("[DONE]")) != nil || !asm.Complete() {
		// A choice without a finish reason: relayed as it came, never stored.
		st.res.fail = streamFailure(errStreamIncomplete)
		return
	}
	body, err := asm.Body()
	if err != nil {
		st.res.fail = streamFailure(err)
		return
	}
	e := &cache.Entry{Status: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
	if pt, ct, ok := asm.Usage(); ok {
		e.PromptTokens, e.CompletionTokens = pt, ct
		s.chargeActual(context.WithoutCancel(ctx), p.t, p.estimate, pt+ct)
	}
	st.res.entry = e
	if storable {
		st.res.stored = s.store(context.WithoutCancel(ctx), p.name, e, p.ttl)
	}
}

// usageOf reads the usage numbers of a non-streamed answer.
func usageOf(body []byte) (prompt, completion int) {
	var v struct {
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return 0, 0
	}
	return v.Usage.PromptTokens, v.Usage.CompletionTokens
}

// ReadingLocker is a Locker that can look for a prompt's entries and take
// its lock in one atomic round trip (redislock's TryAcquireOrRead).
type ReadingLocker interface {
	// TryAcquireOrRead reads keys and takes name only when none holds a
	// value; taking it deletes clear.
	TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (lease Lease, ok bool, vals [][]byte, err error)
}

// pickStored decodes the response and negative entries read with the
// lock; the response wins. undecodable reports a value that is present but
// unreadable (corrupt, or a newer codec during a rolling upgrade): it keeps
// the atomic acquire from ever taking the lock.
func pickStored(vals [][]byte) (e *cache.Entry, negative, undecodable bool) {
	for i, v := range vals {
		if v == nil {
			continue
		}
		d, err := cache.Unmarshal(v)
		if err != nil {
			undecodable = true
			continue
		}
		if e == nil {
			e, negative = d, i == 1
		}
	}
	return e, negative, undecodable
}

// RedisLocker adapts redislock's Locker, whose leases are concrete, to the
// Locker the server consumes.
func RedisLocker(l *redislock.Locker) Locker { return redisLocker{l} }

type redisLocker struct{ l *redislock.Locker }

func (a redisLocker) TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (Lease, bool, [][]byte, error) {
	lease, ok, vals, err := a.l.TryAcquireOrRead(ctx, name, keys, clear...)
	return asLease(lease), ok, vals, err
}

func (a redisLocker) Holder(ctx context.Context, name string) (string, error) {
	return a.l.Holder(ctx, name)
}

func (a redisLocker) TryAcquire(ctx context.Context, name string) (Lease, bool, error) {
	lease, ok, err := a.l.TryAcquire(ctx, name)
	return asLease(lease), ok, err
}

// asLease keeps "no lease" a nil interface rather than a typed nil pointer.
func asLease(l *redislock.Lease) Lease {
	if l == nil {
		return nil
	}
	return l
}
