package coalesce

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"runtime"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce/flight"
	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// call makes the flight's one upstream call, then classifies and stores
// its answer. A stream is relayed into the flight's record as it arrives.
func (c *Coalescer) call(ctx context.Context, req *Request, k keys, st *state, publish bool) (Outcome, error) {
	resp, err := c.o.Caller.Call(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{}, context.Cause(ctx)
		}
		return Outcome{}, err
	}
	defer resp.Body.Close()

	switch {
	case resp.Status == 401 || resp.Status == 403:
		return Outcome{}, ErrUpstreamAuth
	case resp.Status == 200 && resp.EventStream:
		return c.relay(ctx, req, k, st, resp, publish)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, c.o.MaxBody+1))
	if err != nil {
		if ctx.Err() != nil {
			return Outcome{}, context.Cause(ctx)
		}
		return Outcome{}, err
	}
	if int64(len(body)) > c.o.MaxBody {
		return Outcome{}, ErrTooLarge
	}
	e := &entry.Entry{Status: resp.Status, Header: resp.Kept, Body: body}
	if resp.Status != 200 {
		// Passed through, not stored: keep what helps the client, such as
		// Retry-After on a 429.
		e.Header = maps.Clone(resp.Header)
	}
	out := Outcome{Entry: e}
	// Storing is detached from cancellation: the answer is whole and paid for.
	sctx := context.WithoutCancel(ctx)
	decision := negcache.Decide(resp.Status, body, resp.Changed)
	var u wire.Usage
	if decision == negcache.StorePositive {
		// A 200 that is not the API's answer ({"error":...} from a proxy
		// or a broken upstream) is a transient failure: passed through,
		// nothing stored, and an entry kept for the stale windows stays.
		var answer bool
		if answer, u = wire.AnswerUsage(req.Format, req.Endpoint, body); !answer {
			decision = negcache.Pass
		}
	}
	switch decision {
	case negcache.StorePositive:
		setUsage(e, u)
		c.charge(sctx, req, u)
		if resp.Finished != nil {
			resp.Finished(body, u)
		}
		out.Stored = c.storeAnswer(sctx, req, k, e)
	case negcache.StoreNegative:
		e.Header = resp.Kept
		out.Stored = c.store(sctx, k.negative, e, req.NegativeTTL)
		if req.StaleWhileRevalidate > 0 || req.StaleIfError > 0 {
			// A deterministic failure is the answer now: an older entry
			// kept for the stale windows stops serving.
			c.forget(sctx, k.entry)
		}
	}
	return out, nil
}

func (c *Coalescer) charge(ctx context.Context, req *Request, u wire.Usage) {
	if req.Tokens != nil {
		req.Tokens.Charge(ctx, u.Total())
	}
}

// relay copies an upstream event stream into the flight's record while
// assembling the answer, and stores it only if it ended cleanly.
func (c *Coalescer) relay(ctx context.Context, req *Request, k keys, st *state, resp *Response, publish bool) (Outcome, error) {
	st.header = resp.Header
	close(st.streaming)
	if publish {
		published := make(chan struct{})
		go func() {
			defer close(published)
			c.publish(ctx, req, k, st)
		}()
		// The end marker must be written before the lock is released, so
		// followers never mistake a finished leader for a dead one.
		defer func() {
			st.rec.Close(errFlightEnded)
			<-published
		}()
	}

	asm := req.Format.NewAssembler(req.Endpoint)
	er := sse.NewEventReader(resp.Body)
	for {
		ev, err := er.Next()
		if err != nil {
			if ctx.Err() != nil {
				st.rec.Close(context.Cause(ctx))
				return Outcome{}, context.Cause(ctx)
			}
			if errors.Is(err, io.EOF) {
				err = ErrStreamIncomplete // the body ended before the final event
			}
			st.rec.Close(err)
			return Outcome{}, &StreamError{Err: err}
		}
		ev = bytes.Clone(ev) // the reader reuses its buffer; the record keeps ev
		if !req.Format.IsEnd(ev) {
			st.rec.Append(ev) // relayed first: assembling is off the clients' path
			asm.Add(ev)
			continue
		}
		// The final event is relayed after the answer is stored, so a
		// client that saw the end and asks again at once finds the entry.
		asm.Add(ev)
		out, err := c.finish(ctx, req, k, asm, resp)
		st.rec.Append(ev)
		st.endStream(out)
		// Drain what little may follow so the connection is reused.
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return out, err
	}
}

// finish assembles and stores a stream that reached its final event. It
// stores even if every client has just left, because the answer is whole
// and already paid for.
func (c *Coalescer) finish(ctx context.Context, req *Request, k keys, asm wire.Assembler, resp *Response) (Outcome, error) {
	body, u, err := asm.Finish()
	if err != nil {
		// A broken stream (an error event, a choice without a finish
		// reason) is relayed as it came, never stored.
		return Outcome{}, &StreamError{Err: err}
	}
	sctx := context.WithoutCancel(ctx)
	if u.Known {
		c.charge(sctx, req, u)
	}
	if resp.Finished != nil {
		resp.Finished(body, u)
	}
	e := answerEntry(body, u, resp.Header)
	return Outcome{Entry: e, Stored: c.storeAnswer(sctx, req, k, e)}, nil
}

// storeAnswer stores a positive answer: fresh for req.TTL, kept by the
// store for the stale windows beyond it.
func (c *Coalescer) storeAnswer(ctx context.Context, req *Request, k keys, e *entry.Entry) bool {
	e.TTL = req.TTL
	return c.store(ctx, k.entry, e, entry.StoreTTL(req.TTL, req.StaleWhileRevalidate, req.StaleIfError))
}

// upstreamHeader names the upstream that produced an answer and
// providerHeader who runs it; an assembled stream's entry keeps them like
// a plain answer's (entry.KeepHeaders).
const (
	upstreamHeader = "X-Corral-Upstream"
	providerHeader = "X-Corral-Provider"
)

// answerEntry is the stored form of an assembled stream: JSON, naming the
// upstream that streamed it (and its provider) when h does.
func answerEntry(body []byte, u wire.Usage, h map[string][]string) *entry.Entry {
	header := map[string][]string{"Content-Type": {"application/json"}}
	for _, k := range [...]string{upstreamHeader, providerHeader} {
		if v := h[k]; len(v) > 0 {
			header[k] = v
		}
	}
	e := &entry.Entry{Status: 200, Header: header, Body: body}
	setUsage(e, u)
	return e
}

// setUsage keeps an answer's usage in its entry, for tokens/min and the
// savings of the hits it will serve.
func setUsage(e *entry.Entry, u wire.Usage) {
	e.PromptTokens, e.CompletionTokens = u.Prompt, u.Completion
	e.CachedTokens, e.CacheWriteTokens, e.Model = u.Cached, u.CacheWrite, u.Model
	e.UsageUnread = !u.Known
}

// publish copies the flight's record into the live stream for followers
// on other instances, batch by batch, and marks its end. It is a cursor
// like any follower's, so it never slows the leader. The first batch also
// wakes the other instances' waiters, which then find the stream. It
// returns when the record has ended and the end is written.
func (c *Coalescer) publish(ctx context.Context, req *Request, k keys, st *state) {
	ctx = context.WithoutCancel(ctx)
	cur := st.rec.Cursor()
	first := true
	for {
		batch, err := cur.Next(ctx)
		if err != nil {
			var cause error
			if !errors.Is(err, io.EOF) {
				cause = err
			}
			c.o.Health.Record(c.o.Streams.End(ctx, k.stream, cause))
			return
		}
		if first {
			// The local client is written first: its relay and this cursor
			// wake on the same Append, and on a busy instance's one core
			// the XADD's work ran before the client's write (a measurable
			// share of the leader's time to first byte). The events stay
			// in the record meanwhile, so the followers on other instances
			// get every one, in order, one local write later.
			c.awaitRelayed(req, st, cur)
			// The first batch names the upstream answering and its
			// provider, for the X-Corral-Upstream and X-Corral-Provider
			// of followers on other instances.
			var origin StreamOrigin
			if v := st.header[upstreamHeader]; len(v) > 0 {
				origin.Upstream = v[0]
			}
			if v := st.header[providerHeader]; len(v) > 0 {
				origin.Provider = v[0]
			}
			err = c.o.Streams.Start(ctx, k.stream, origin, batch)
		} else {
			err = c.o.Streams.Append(ctx, k.stream, batch)
		}
		if err != nil {
			// The followers on other instances would miss these events and
			// relay the rest with a hole in it: end their stream as broken
			// instead (they end with an error event and may retry; no new
			// waiter follows a broken stream). The leader's own clients
			// and its stored answer are not affected.
			c.o.Health.Record(err)
			c.o.Health.Record(c.o.Streams.End(ctx, k.stream, fmt.Errorf("%w: %w", ErrLiveStreamGap, err)))
			return
		}
		if first && c.o.Bus != nil {
			c.o.Health.Record(c.o.Bus.Publish(ctx, k.entry))
		}
		first = false
	}
}

// awaitRelayed holds the publisher's first Append, when the leader's
// request Relays, until a local member has written the stream's first
// events to its client (Flight.Relayed). No timer bounds it: it also
// ends when the stream moves on (its next event, or its end), so a
// client whose first write stalls holds the other instances' followers
// back by one event at most. Stop ends it too. A flight whose request
// does not relay (a background refresh) yields the core once, then
// publishes.
func (c *Coalescer) awaitRelayed(req *Request, st *state, cur *flight.Cursor) {
	if !req.Relays {
		runtime.Gosched() // the local followers' relays, if any, write first
		return
	}
	select {
	case <-st.relayed:
	case <-cur.Ready():
	case <-c.stop.Done():
	}
	// Woken by a relay, this goroutine runs next on the core, ahead of
	// the other streams' relays already waiting to write their clients'
	// events: it yields to them first.
	runtime.Gosched()
}
