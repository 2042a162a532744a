package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/flight"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
)

// call is one request to a cached model endpoint, as its handler learned
// it.
type call struct {
	t        *tenant.Tenant
	format   wire.Format
	endpoint string
	body     []byte
	facts    wire.Facts
	ctl      controls
	stored   *recorder // records this tenant's stored completion, when it asked for one
	pin      string    // the upstream holding an object the request names ("" = route by model)
	query    string    // the client's query string, forwarded (Anthropic's ?beta=true)
}

// handleModelCall serves a cached and coalesced endpoint of format
// (chat completions, completions, embeddings): validate, check the
// allow-list, then look up, coalesce and call upstream.
//
// The handler's goroutine stays below a stream for the stream's whole
// life, and a stack that doubles once stays doubled, so the frames under
// a stream are kept small: reading and checking the request is newCall's,
// out of the frame the stream is followed from. With the headers flushed
// off this goroutine (startEvents), a stream's handler parks 3.7 KiB deep
// and stays within 8 KiB of stack, where it kept 16 KiB per open stream
// before (issue 20).
func (s *Server) handleModelCall(format wire.Format, endpoint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := recordFrom(r.Context())
		c, aerr := s.newCall(r, rec, format, endpoint)
		if aerr == nil {
			aerr = s.checkBudget(w, c.t, c.facts.Model)
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if !c.t.Cache || c.ctl.noStore || c.facts.Bypass != "" {
			s.serveBypass(w, r, c)
			return
		}
		req := s.flightRequest(c)
		if s.serveLookup(w, r, rec, c, req) {
			return
		}
		s.serveFlight(w, r, c, req)
	}
}

// newCall reads and checks a model call: its body, cache controls, facts,
// the tenant's allow-list and the stored objects it names or creates.
//
//go:noinline
func (s *Server) newCall(r *http.Request, rec *logRecord, format wire.Format, endpoint string) (*call, *apiError) {
	t, _ := tenant.FromContext(r.Context())
	if apiOfRequest(r) != apiOf(endpoint) {
		// anthropic-version on an OpenAI endpoint: Anthropic's API has none
		// of them.
		return nil, errNoAnthropicEndpoint
	}
	if compressed(r) {
		return nil, errCompressedBody
	}
	body, aerr := readBody(r)
	if aerr != nil {
		return nil, aerr
	}
	ctl, aerr := parseControls(r.Header)
	if aerr != nil {
		return nil, aerr
	}
	facts, err := format.Parse(t.ID, keyScope(r, endpoint), body)
	if err != nil {
		return nil, errBadBody(err)
	}
	if facts.Model == "" {
		return nil, errInvalidRequest("You must provide a model parameter.", "model")
	}
	rec.model, rec.endpoint = facts.Model, endpoint
	if !t.Allows(facts.Model) {
		return nil, errModelNotAllowed(facts.Model)
	}
	// Stored objects: a prompt may name files (file parts) and a chat
	// completion with store: true creates one. Both are checked before
	// anything is served or forwarded; answers with store: true are
	// recorded for this tenant whichever way they are served.
	found, aerr := objectRefs(r, endpoint, body)
	if aerr != nil {
		return nil, aerr
	}
	acc := objects.Access{API: apiOf(endpoint)} // a Messages prompt names Anthropic's files
	creates := createsObject(acc, endpoint, found)
	pin, aerr := s.guardObjects(r.Context(), t, acc, found, creates)
	if aerr != nil {
		return nil, aerr
	}
	c := &call{t: t, format: format, endpoint: endpoint, body: body, facts: facts, ctl: ctl, pin: pin, query: r.URL.RawQuery}
	if creates {
		c.stored = s.newRecorder(r.Context(), t, true, storedKind(endpoint))
		c.stored.entryName = keying.Name(t.Scope, facts.Hash, keying.Response)
	}
	if facts.Bypass != "" {
		rec.bypass = facts.Bypass // e.g. a background run or a hosted tool: never cached
	}
	return c, nil
}

// serveLookup answers from the cache when the lookup finds the prompt's
// entry (a hit, a negative or a stale answer) and reports whether it did.
//
//go:noinline
func (s *Server) serveLookup(w http.ResponseWriter, r *http.Request, rec *logRecord, c *call, req *coalesce.Request) bool {
	out, ok := s.lookup(r.Context(), req)
	if !ok {
		return false
	}
	rec.cache = sourceName(out.Source)
	if out.Source == coalesce.Hit || out.Source == coalesce.Stale {
		rec.saved = out.Entry.PromptTokens + out.Entry.CompletionTokens
		s.noteSaved(rec, out.Entry)
		c.stored.entry(out.Entry)
	}
	if out.Source == coalesce.Stale {
		s.refresh(r, c, req)
	}
	s.tokenHeaders(r.Context(), c.t, w.Header())
	s.serveEntry(w, c, out.Entry, rec.cache, false)
	return true
}

// keyScope is what a prompt's key is scoped to beside the tenant: the
// endpoint and what else changes the answer without being in the body,
// the query string (Anthropic's ?beta=true, Azure's api-version) and the
// version and beta headers of the API (anthropic-version, anthropic-beta,
// OpenAI-Beta).
func keyScope(r *http.Request, endpoint string) string {
	q := r.URL.RawQuery
	v, b := r.Header["Anthropic-Version"], r.Header["Anthropic-Beta"]
	ob := r.Header["Openai-Beta"]
	if q == "" && len(v) == 0 && len(b) == 0 && len(ob) == 0 {
		return endpoint // the common case: the key of an endpoint as it always was
	}
	return endpoint + "?" + q + "\x00anthropic-version=" + strings.Join(v, ",") +
		"\x00anthropic-beta=" + strings.Join(b, ",") + "\x00openai-beta=" + strings.Join(ob, ",")
}

// route is where the call goes upstream.
func (c *call) route() route { return route{pin: c.pin, model: c.facts.Model} }

// storedKind is the kind of stored object a model endpoint's answers are.
func storedKind(endpoint string) string {
	if endpoint == "/responses" {
		return "response"
	}
	return "chat_completion"
}

// serveBypass forwards a request that may not be cached or coalesced.
func (s *Server) serveBypass(w http.ResponseWriter, r *http.Request, c *call) {
	// A call no upstream can take now is answered 503 upstream_unavailable
	// and costs no tokens.
	if c.t.TokensPerMinute > 0 && s.canTake(c.endpoint, c.route()) {
		res, aerr := s.takeTokens(r.Context(), c.t, ratelimit.Tokens, c.t.TokensPerMinute, c.facts.Estimate)
		ratelimit.SetHeaders(w.Header(), ratelimit.Tokens.Suffix(), res)
		if aerr != nil {
			writeError(w, aerr) // a refusal, not an answer: no cache status
			return
		}
	}
	// A BYPASS is counted in the tenant's usage (tokens, cost, by model)
	// from its answer's usage, read as it is relayed, and charged that
	// actual cost against a budget. A stream is sent asking for its usage
	// as a flight's is (wire.Format.Prepare), the usage chunk hidden from
	// a client that did not ask for it. An answer whose usage is unknown
	// (none came, or none Corral believes) is charged its estimate, and
	// so is one cut short: its reservation stands.
	rec := recordFrom(r.Context())
	estimate := s.estimateCost(c.facts.Model, c.facts.Estimate)
	ro := relayOptions{format: c.format, endpoint: c.endpoint, skip: c.format.Hidden(c.facts)}
	ro.usage = func(u wire.Usage) { // called on a 200 answer only
		rec.usageRow = answeredModel(u.Model, c.facts.Model)
		// The answer's headers are the response's by now: they name
		// the upstream that answered.
		rec.cost = s.chargeBypass(c.t.Scope, c.facts.Model, w.Header().Get(failover.UpstreamHeader), u, estimate)
	}
	body := c.body
	if prepared, changed := c.format.Prepare(c.facts, c.body); changed {
		body, ro.original = prepared, c.body
	}
	if c.t.Budget.Set() {
		fc := &flightCharge{s: s, t: c.t, estimate: estimate}
		if err := fc.Take(r.Context()); err != nil {
			writeError(w, statusError(err))
			return
		}
		// Held at the estimate until the answer's usage is read; a call
		// that got no 200 answer (an upstream error, no upstream reached)
		// costs nothing, as a leader's failed call does.
		rec.cost = fc.estimate
		answered := false
		ro.answered = func() { answered = true }
		defer func() {
			if !answered {
				rec.cost = 0
			}
			s.settleBudget(context.WithoutCancel(r.Context()), c.t.Scope, fc, rec.cost)
		}()
	}
	rec.cache = cacheBypass
	setCacheHeaders(w.Header(), cacheBypass, nil, false, c.ctl, s.now())
	req := upstream.Request{Method: http.MethodPost, Path: c.endpoint, RawQuery: c.query, Header: r.Header, Body: body}
	if c.stored != nil {
		s.forwardObjects(w, r, c.t, c.route(), req, objects.Access{Kind: storedKind(c.endpoint)}, true, ro)
		return
	}
	s.forwardWith(w, r, c.route(), req, ro)
}

// flightRequest is what this request contributes to its lookup and, should
// it lead, to its prompt's flight.
func (s *Server) flightRequest(c *call) *coalesce.Request {
	ttl := c.t.CacheTTL
	if c.ctl.ttl > 0 {
		ttl = c.ctl.ttl
	}
	return &coalesce.Request{
		Tenant:      c.t.Scope,
		Hash:        c.facts.Hash,
		Endpoint:    c.endpoint,
		Query:       c.query,
		Model:       c.facts.Model,
		Format:      c.format,
		Stream:      c.facts.Stream,
		NoCache:     c.ctl.noCache,
		MinStoredAt: c.ctl.minStoredAt(s.now()),
		TTL:         ttl,
		NegativeTTL: c.t.NegativeTTL,
		// Kept past the TTL for the tenant's stale windows, never served
		// as a hit once the TTL is over.
		StaleWhileRevalidate: c.t.StaleWhileRevalidate,
		StaleIfError:         c.t.StaleIfError,
		Upstream:             c.pin,
		Body:                 c.body,
		Leaders:              c.t.Leaders,
		MaxLeaders:           c.t.MaxLeaders,
		Estimate:             c.facts.Estimate,
	}
}

// refresh starts the background refresh of an entry just served stale
// (stale_while_revalidate), with what a leader's request would carry. A
// refresh is an upstream call: for a tenant with a budget it is skipped
// while this instance sees the budget spent (the stale entry keeps
// serving), and otherwise reserves its estimate like any leader, so the
// budget script refuses it when another instance spent the rest.
func (s *Server) refresh(r *http.Request, c *call, req *coalesce.Request) {
	rr := *req
	rr.Header = r.Header.Clone()
	if body, changed := c.format.Prepare(c.facts, c.body); changed {
		rr.Body, rr.Original = body, c.body
	}
	rr.Tokens = nil
	if c.t.Budget.Set() {
		if left, _ := s.budgets.Standing(c.t.Scope, c.t.Budget).Remaining(); left <= 0 {
			return
		}
		rr.Tokens = &flightCharge{s: s, t: c.t, estimate: s.estimateCost(c.facts.Model, c.facts.Estimate)}
	}
	if s.flights.Refresh(&rr) {
		s.metrics.Refresh(c.t.ID)
	}
}

// serveFlight joins (or starts) the flight for this prompt and answers
// from it: live from its stream, or from its final outcome.
//
// Its frame stays under a followed stream for the stream's life, so the
// work before and after the stream is in functions of their own
// (joinFlight, awaitFlight, serveResult).
func (s *Server) serveFlight(w http.ResponseWriter, r *http.Request, c *call, req *coalesce.Request) {
	_, span := s.span(r.Context(), telemetry.SpanFlight)
	defer span.End()
	f, tokens := s.joinFlight(r, c, req, span)
	defer f.Leave()
	// Whichever way this request ends, it holds back no live stream: a
	// stream's members say so at their first write (followStream).
	defer f.Relayed()
	joined := time.Now()
	if !s.awaitFlight(w, r, c, f, span, tokens) {
		return
	}
	// A streamed answer is followed from its record even when the flight
	// has already ended: the record holds the whole stream as it came.
	if c.facts.Stream && f.IsStreaming() {
		rec := recordFrom(r.Context())
		source := f.StreamSource()
		rec.cache = sourceName(source)
		if s.followStream(w, r, c, f, rec.cache) {
			s.account(rec, c, f, source, f.Streamed(), joined)
		}
		return
	}
	s.serveResult(w, r, c, f, joined)
}

// joinFlight joins the prompt's flight. The leader's request gets what
// only a flight needs: its headers, the body prepared for the upstream
// (the usage chunk asked for) and its tokens/min budget, whose decision
// tokens holds once the flight made it.
//
//go:noinline
func (s *Server) joinFlight(r *http.Request, c *call, req *coalesce.Request, span trace.Span) (f *coalesce.Flight, tokens *tenantTokens) {
	f = s.flights.Join(c.t.Scope, c.facts.Hash, func() *coalesce.Request {
		if span.IsRecording() {
			// Set before the flight starts: the flight may mark it a
			// follower of another instance's leader.
			span.SetAttributes(telemetry.FlightRole.String("leader"))
			req.Span = span
		}
		req.Header = r.Header.Clone()
		// A streaming client is written before the live stream is
		// published: it calls Relayed after its first write (followStream)
		// or as it leaves (below).
		req.Relays = c.facts.Stream
		if body, changed := c.format.Prepare(c.facts, c.body); changed {
			req.Body, req.Original = body, c.body
		}
		if c.t.TokensPerMinute > 0 {
			tokens = &tenantTokens{s: s, t: c.t, estimate: c.facts.Estimate, canTake: func() bool { return s.canTake(c.endpoint, c.route()) }}
			req.Tokens = tokens
		}
		if c.t.Budget.Set() {
			req.Tokens = &flightCharge{s: s, t: c.t, tokens: tokens, estimate: s.estimateCost(c.facts.Model, c.facts.Estimate)}
		}
		return req
	})
	return f, tokens
}

// awaitFlight waits until the flight streams or ends and sets the
// tokens/min headers; false means the client left first (answered).
//
//go:noinline
func (s *Server) awaitFlight(w http.ResponseWriter, r *http.Request, c *call, f *coalesce.Flight, span trace.Span, tokens *tenantTokens) bool {
	if !f.Leader() && span.IsRecording() {
		span.SetAttributes(telemetry.FlightRole.String("follower"))
		span.AddLink(trace.Link{SpanContext: f.LeaderSpan()})
	}
	select {
	case <-f.Streaming():
	case <-f.Done():
	case <-r.Context().Done():
		writeError(w, errClientClosed)
		return false
	}
	// The leader reports the tokens/min decision its flight made; everyone
	// else sees the bucket as it is (they cost nothing).
	if tokens != nil && tokens.taken {
		ratelimit.SetHeaders(w.Header(), ratelimit.Tokens.Suffix(), tokens.res)
	} else {
		s.tokenHeaders(r.Context(), c.t, w.Header())
	}
	return true
}

// serveResult answers from the flight's final outcome once it has ended.
//
//go:noinline
func (s *Server) serveResult(w http.ResponseWriter, r *http.Request, c *call, f *coalesce.Flight, joined time.Time) {
	select {
	case <-f.Done():
	case <-r.Context().Done():
		writeError(w, errClientClosed)
		return
	}

	rec := recordFrom(r.Context())
	out, err := f.Result()
	source := f.Source(out)
	rec.cache = sourceName(source)
	s.account(rec, c, f, source, out, joined)
	switch {
	case out.Entry != nil:
		s.serveEntry(w, c, out.Entry, rec.cache, out.Stored && f.Leader())
	case err == nil, abandoned(err):
		// The work ended without an answer: cancelled.
		writeError(w, errUpstream)
	default:
		aerr := statusError(err)
		var pe *flight.PanicError
		switch {
		case errors.As(err, &pe):
			s.log.ErrorContext(r.Context(), "flight panicked", "panic", pe.Value, "stack", string(pe.Stack))
		case aerr.Status == http.StatusTooManyRequests, aerr == errNoUpstreamForModel, aerr == errNoUpstreamAvailable:
			// Corral's own refusal (tokens/min, tenant_concurrency_exceeded,
			// a model no upstream serves or none can take now; an upstream
			// 429 is an entry) is no answer: it carries no X-Corral-Cache
			// and is not counted as a cache outcome.
			rec.cache = ""
		default:
			setCacheHeaders(w.Header(), rec.cache, nil, false, c.ctl, s.now())
		}
		rec.err = err.Error()
		writeError(w, aerr)
	}
}

// account notes what this request cost or saved once its answer is known.
func (s *Server) account(rec *logRecord, c *call, f *coalesce.Flight, source coalesce.Source, out coalesce.Outcome, joined time.Time) {
	e := out.Entry
	if e == nil || e.Status != http.StatusOK {
		return
	}
	c.stored.entry(e)
	switch source {
	case coalesce.Miss:
		rec.prompt, rec.completion = e.PromptTokens, e.CompletionTokens
		pa := s.callCost(e, rec.model, s.estimateCost(c.facts.Model, c.facts.Estimate))
		rec.cost, rec.priceLabel = pa.cost, pa.label
		rec.usageRow = usageModel(e, rec.model)
		if f.Ended() { // the upstream time is known when the flight ends
			done, _ := f.Result()
			rec.upstreamMS = float64(done.Upstream.Microseconds()) / 1000
		}
	case coalesce.Coalesced:
		rec.saved = e.PromptTokens + e.CompletionTokens
		s.noteSaved(rec, e)
		s.metrics.Coalesced(c.t.ID, time.Since(joined))
	default:
		rec.saved = e.PromptTokens + e.CompletionTokens
		s.noteSaved(rec, e)
	}
}

// abandoned reports a flight that ended because its context did (every
// waiter left), not because of anything the upstream did: an upstream
// timeout may wrap a deadline too, but it is an upstream error.
func abandoned(err error) bool {
	return upstream.KindOf(err) == 0 && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded))
}
