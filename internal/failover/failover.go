// Package failover sends one request to the first of several upstreams
// that answers it: the pool's candidates for the request's API and model,
// in order, moving on before the first byte reaches the client when a
// candidate cannot be reached, times out before its headers, or answers
// 429, 500, 502, 503, 504 (or 529, Anthropic's "overloaded"). Any other
// status is the answer. Each outcome feeds the pool's passive health.
//
// Only the part before the first byte is retried: once an answer's
// headers are accepted the response goes to the caller, who may already
// be streaming it, and a model call is not idempotent (it costs money and
// its answer differs), so it is never replayed after that.
package failover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/upstream"
)

// UpstreamHeader names, on every answer an upstream produced, the
// upstream that produced it. Any header of that name an upstream sends
// itself is dropped.
const UpstreamHeader = "X-Corral-Upstream"

// ProviderHeader names, beside UpstreamHeader, who runs that upstream
// (openai, anthropic, azure, bedrock, vertex), so a client can tell a
// Claude answer from Bedrock from one from Anthropic's own API. Any
// header of that name an upstream sends itself is dropped.
const ProviderHeader = "X-Corral-Provider"

// nameAnswer sets the headers that say which upstream produced resp, replacing
// any of those names the upstream sent itself.
func nameAnswer(resp *http.Response, m *pool.Member) {
	resp.Header.Del(UpstreamHeader)
	resp.Header.Del(ProviderHeader)
	resp.Header.Set(UpstreamHeader, m.Name)
	resp.Header.Set(ProviderHeader, m.ProviderName())
}

// Doer calls one upstream (upstream.Client).
type Doer interface {
	Do(ctx context.Context, req upstream.Request) (*http.Response, error)
}

var _ Doer = (*upstream.Client)(nil)

// Scoped is a Doer that serves only some of its API's endpoints: a cloud's
// runtime API (Bedrock, Vertex AI) serves model calls and keeps no stored
// objects. The router passes over it for every other path, so such a call
// goes to an upstream that serves it or to none (ErrNotServed); it is
// never sent where it cannot be answered.
type Scoped interface {
	// Serves reports whether the upstream answers method on path (below
	// /v1, e.g. "/messages").
	Serves(method, path string) bool
}

// serves reports whether d answers method on path: any Doer that is not
// Scoped serves every path of its API.
func serves(d Doer, method, path string) bool {
	s, ok := d.(Scoped)
	return !ok || s.Serves(method, path)
}

// Set is one generation of upstreams: the routing pool and a client per
// member name. A reload swaps in a new Set; calls already running finish
// on the Set they started with.
type Set struct {
	Pool    *pool.Pool
	Clients map[string]Doer
}

// Observer sees every attempt (metrics). Methods must be cheap.
type Observer interface {
	Attempt(upstream, outcome string, d time.Duration)
}

// Router routes calls over the current Set.
type Router struct {
	set     atomic.Pointer[Set]
	timeout time.Duration
	obs     Observer
	tracer  trace.Tracer // nil: attempts are not traced
	now     func() time.Time
	passive bool // outcomes feed the pool's health (off for a lone upstream)
}

// Options configure a Router.
type Options struct {
	// Timeout bounds a call's whole time, every attempt and the answer's
	// body included (CORRAL_UPSTREAM_TIMEOUT). Default 120s.
	Timeout time.Duration
	// Observer sees attempts; nil sees nothing.
	Observer Observer
	// Tracer records each attempt as a client span with the GenAI
	// attributes (see attempt); nil records nothing.
	Tracer trace.Tracer
	// Now is the clock (Retry-After dates). Default time.Now.
	Now func() time.Time
	// NoHealth keeps no cooldowns or circuits: with one upstream there is
	// nowhere to fail over to, and refusing calls to it would only turn
	// its answers into Corral's errors.
	NoHealth bool
}

// New returns a router over set.
func New(set *Set, o Options) *Router {
	r := &Router{timeout: o.Timeout, obs: o.Observer, tracer: o.Tracer, now: o.Now, passive: !o.NoHealth}
	if r.timeout <= 0 {
		r.timeout = 120 * time.Second
	}
	if r.now == nil {
		r.now = time.Now
	}
	r.set.Store(set)
	return r
}

// Swap installs a new Set (a reload), carrying each upstream's health
// over by name, and returns the old one.
func (r *Router) Swap(set *Set) *Set {
	if old := r.set.Load(); old != nil {
		set.Pool.Carry(old.Pool)
	}
	return r.set.Swap(set)
}

// Current returns the Set in use.
func (r *Router) Current() *Set { return r.set.Load() }

// ErrNoRoute means no upstream serves the model on the API at all.
var ErrNoRoute = errors.New("failover: no upstream serves this model")

// ErrNotServed means upstreams serve the model on the API, but none of
// them serves the request's endpoint: a stored object, or an endpoint a
// cloud's runtime API does not have.
var ErrNotServed = errors.New("failover: no upstream serves this endpoint")

// ErrNoneAvailable means upstreams serve the model but none may take a
// call now (every one cooling down or with its circuit open).
var ErrNoneAvailable = errors.New("failover: every upstream for this model is cooling down or has its circuit open")

// Do sends req to the candidates for api and model in turn and returns the
// first answer that is not a failover trigger, with UpstreamHeader and
// ProviderHeader set.
// When every candidate failed, the last failure is returned as it was: the
// last trigger status as a response, or the last call error. A request
// with a streamed body (req.Stream) gets one attempt: its bytes cannot be
// read twice.
func (r *Router) Do(ctx context.Context, api, model string, req upstream.Request) (*http.Response, error) {
	set := r.set.Load()
	cands, matched := set.Pool.Candidates(api, model)
	if !matched {
		return nil, ErrNoRoute
	}
	cands, matched = servedBy(set, cands, api, model, req)
	if !matched {
		return nil, ErrNotServed
	}
	req.Model = model
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	var lastErr error = ErrNoneAvailable
	var last *http.Response
	tried := 0
	for i, m := range cands {
		if req.Stream != nil && tried > 0 {
			break
		}
		if !set.Pool.Acquire(m) {
			continue
		}
		tried++
		if last != nil {
			last.Body.Close()
			last = nil
		}
		start := time.Now()
		actx, span := r.attempt(ctx, m, model, req, tried)
		resp, err := set.Clients[m.Name].Do(actx, req)
		outcome := r.judge(set.Pool, m, pool.Call{Tenant: req.Tenant}, resp, err)
		r.observe(m, outcome, start)
		answer := err == nil && (outcome == "answer" || outcome == "auth_error" || i == len(cands)-1)
		span = endAttempt(span, resp, err, outcome, answer)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil {
				break // the caller left or the whole call's time is up
			}
			continue
		}
		nameAnswer(resp, m)
		if answer {
			resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel, span: span}
			return resp, nil
		}
		last = resp // a trigger: kept in case nothing better comes
	}
	if last != nil {
		last.Body = &cancelOnClose{ReadCloser: last.Body, cancel: cancel}
		return last, nil
	}
	cancel()
	return nil, lastErr
}

// servedBy keeps the candidates whose Doer serves req's method and path.
// ok is false when no upstream serving model on api serves the path at
// all, available now or not (the pool's slice is shared: it is copied only
// when one is dropped).
func servedBy(set *Set, cands []*pool.Member, api, model string, req upstream.Request) (kept []*pool.Member, ok bool) {
	for i, m := range cands {
		if serves(set.Clients[m.Name], req.Method, req.Path) {
			continue
		}
		kept = make([]*pool.Member, i, len(cands))
		copy(kept, cands[:i])
		for _, m := range cands[i+1:] {
			if serves(set.Clients[m.Name], req.Method, req.Path) {
				kept = append(kept, m)
			}
		}
		if len(kept) > 0 {
			return kept, true
		}
		for _, m := range set.Pool.Members() {
			if m.Serves(api, model) && serves(set.Clients[m.Name], req.Method, req.Path) {
				return kept, true // it serves the path but may not take a call now
			}
		}
		return kept, false
	}
	return cands, true
}

// DoAt sends req to the upstream called name only: a follow-up on an
// object goes to the upstream that holds it, whatever its health (no
// other has the object). An upstream that does not serve req's path
// (Scoped) is never sent it: ErrNotServed. A failure still feeds its health; a success
// does not close its open circuit (only a probe does).
func (r *Router) DoAt(ctx context.Context, name string, req upstream.Request) (*http.Response, error) {
	set := r.set.Load()
	c, ok := set.Clients[name]
	m := set.Pool.Member(name)
	if !ok || m == nil {
		return nil, fmt.Errorf("%w: %q", ErrUnknownUpstream, name)
	}
	if !serves(c, req.Method, req.Path) {
		// The name now runs on a cloud that keeps no objects (a reload
		// changed its provider): the object is not there to follow.
		return nil, ErrNotServed
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	start := time.Now()
	actx, span := r.attempt(ctx, m, "", req, 1)
	resp, err := c.Do(actx, req)
	outcome := r.judge(set.Pool, m, pool.Call{Tenant: req.Tenant, Pinned: true}, resp, err)
	r.observe(m, outcome, start)
	span = endAttempt(span, resp, err, outcome, err == nil)
	if err != nil {
		cancel()
		return nil, err
	}
	nameAnswer(resp, m)
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel, span: span}
	return resp, nil
}

// observe feeds one attempt, started at start and named outcome by judge,
// to the metrics and to the member's latency and failure counts.
func (r *Router) observe(m *pool.Member, outcome string, start time.Time) {
	d := time.Since(start)
	if r.obs != nil {
		r.obs.Attempt(m.Name, outcome, d)
	}
	switch outcome {
	case "canceled":
		return // the client left: says nothing of the upstream
	case "error", "timeout", "retry", "auth_error":
		m.Observe(d, true, r.now())
	default:
		m.Observe(d, false, r.now())
	}
}

// Snapshot is the current upstreams' health and traffic, read-only.
func (r *Router) Snapshot() []pool.Snapshot { return r.set.Load().Pool.Snapshot() }

// ErrUnknownUpstream means an object's record names an upstream that is
// no longer configured.
var ErrUnknownUpstream = errors.New("failover: no such upstream")

// Single is a router over one upstream called name serving every model of
// api, keeping no health (o.NoHealth is set): Corral without an upstreams
// file, exactly as before there were several.
func Single(name, api string, c Doer, o Options) *Router {
	o.NoHealth = true
	m := &pool.Member{Name: name, API: api, Weight: 1}
	return New(&Set{Pool: pool.New([]*pool.Member{m}, pool.Options{}), Clients: map[string]Doer{name: c}}, o)
}

// CanTake reports whether a call for model on api (Do) would find an
// upstream to take it now. The server asks before it charges a tenant's
// tokens/min: a call no upstream can take is answered with Corral's 503,
// which costs the tenant nothing. It is a moment's view: Do decides.
func (r *Router) CanTake(api, model string) bool {
	return r.set.Load().Pool.CanTake(api, model)
}

// judge feeds one attempt's outcome to m's health (c says whose call it
// was and whether it was pinned) and names it for metrics: "answer",
// "retry" (a status that fails over), "cooldown" (a 429 that said when to
// retry), "auth_error" (the upstream refused Corral's credentials: the
// answer, counted against the upstream), "error", "timeout" or "canceled".
func (r *Router) judge(p *pool.Pool, m *pool.Member, c pool.Call, resp *http.Response, err error) string {
	if !r.passive {
		p = nil // name the outcome, record nothing
	}
	record := func(o pool.Outcome, name string) string {
		c.Outcome = o
		p.Record(m, c)
		return name
	}
	if err != nil {
		switch upstream.KindOf(err) {
		case upstream.Canceled:
			return record(pool.Abandoned, "canceled")
		case upstream.Timeout:
			// Perhaps only this request is slow: the pool counts it once
			// other tenants' calls time out too.
			return record(pool.Timeout, "timeout")
		}
		return record(pool.Failure, "error")
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		if d, ok := retryAfter(resp.Header, r.now()); ok {
			p.CoolDown(m, d)
			return record(pool.Abandoned, "cooldown") // frees a probe slot; a cooldown is not a failure
		}
		return record(pool.Failure, "retry")
	case Trigger(m.API, resp.StatusCode):
		return record(pool.Failure, "retry")
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		// Corral's own credentials for this upstream were refused (an
		// expired cloud role, a revoked key): the answer (the client gets
		// 502), and evidence against the upstream once it is not all one
		// tenant's (pool.Refused).
		return record(pool.Refused, "auth_error")
	}
	return record(pool.Success, "answer")
}

// Trigger reports whether status from an upstream of api moves a request
// on to the next candidate.
func Trigger(api string, status int) bool {
	switch status {
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	case 529:
		return api == "anthropic"
	}
	return false
}

// retryAfter reads retry-after-ms (milliseconds) or Retry-After (seconds
// or an HTTP date).
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now), true
	}
	return 0, false
}

// cancelOnClose releases the call's overall deadline with its body, and
// ends the answering attempt's span (nil when not traced): the attempt
// lasts until its answer has been read.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
	span   trace.Span
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	if c.span != nil {
		c.span.End() // a second End is ignored
	}
	return err
}

// AttemptSpan is the span of the attempt that produced resp, still open
// until resp's body is closed, so that whoever reads the answer can record
// its usage on it; nil when the attempt was not traced.
func AttemptSpan(resp *http.Response) trace.Span {
	if c, ok := resp.Body.(*cancelOnClose); ok {
		return c.span
	}
	return nil
}

// attempt starts the span of one attempt, a client span named
// "{gen_ai.operation.name} {gen_ai.request.model}" (or the method, for a
// call that is no model call: files, batches, ...), carried in the
// returned context so the upstream client sends its traceparent. model is
// "" when the call is routed by name; the caller may add it.
func (r *Router) attempt(ctx context.Context, m *pool.Member, model string, req upstream.Request, n int) (context.Context, trace.Span) {
	if r.tracer == nil {
		return ctx, nil
	}
	op := telemetry.Operation(req.Path)
	name := telemetry.Method(req.Method)
	provider := m.ProviderName()
	genAI := telemetry.GenAIProviderName(provider)
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs, telemetry.Upstream.String(m.Name), telemetry.UpstreamProvider.String(provider), telemetry.Attempt.Int(n),
		telemetry.GenAIProvider.String(genAI), telemetry.GenAISystem.String(genAI))
	if op != "" {
		name = op
		attrs = append(attrs, telemetry.GenAIOperation.String(op))
	}
	if model != "" {
		model = telemetry.Bound(model) // the client's text
		name += " " + model
		attrs = append(attrs, telemetry.GenAIRequestModel.String(model))
	}
	return r.tracer.Start(ctx, name, clientKind, trace.WithAttributes(attrs...))
}

// clientKind is built once: an option boxed per call is an allocation.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)

// endAttempt records how an attempt went and ends its span, unless the
// attempt's answer is going to the caller (keep): that span ends with the
// answer's body and is returned. It returns nil otherwise.
func endAttempt(span trace.Span, resp *http.Response, err error, outcome string, keep bool) trace.Span {
	if span == nil {
		return nil
	}
	span.SetAttributes(telemetry.Outcome.String(outcome))
	switch {
	case err != nil:
		span.SetAttributes(telemetry.ErrorType.String(outcome))
		span.SetStatus(codes.Error, outcome) // the kind only: an error's text may name the upstream's URL
	default:
		span.SetAttributes(telemetry.HTTPStatusCode.Int(resp.StatusCode))
		if resp.StatusCode >= 400 {
			span.SetAttributes(telemetry.ErrorType.String(strconv.Itoa(resp.StatusCode)))
			span.SetStatus(codes.Error, "")
		}
	}
	if keep {
		return span
	}
	span.End()
	return nil
}
