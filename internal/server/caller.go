package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
)

// caller is the flight layer's upstream: one HTTP call through the
// upstream client.
type caller struct{ s *Server }

var _ coalesce.Caller = caller{}

// maxRejectBody bounds the 400 body read to see whether the upstream
// rejected the prepared body.
const maxRejectBody = 64 << 10

// Call sends the flight's body: the prepared one (the usage chunk asked
// for) unless the upstream is known to refuse it (spliceMemory). When an
// upstream refuses the prepared body's stream_options, the client's own
// body is sent to that upstream at once, and that upstream is remembered.
func (c caller) Call(ctx context.Context, req *coalesce.Request) (*coalesce.Response, error) {
	s := c.s
	body, changed := req.Body, req.Original != nil
	if changed && s.splice.skip(req.Upstream, s.serving(apiOf(req.Endpoint), req.Model)) {
		body, changed = req.Original, false
	}
	resp, err := s.send(ctx, req.Upstream, req.Model, upstream.Request{Method: http.MethodPost, Path: req.Endpoint, RawQuery: req.Query, Header: req.Header, Body: body, Tenant: tenant.IDOfScope(req.Tenant)})
	if err == nil && changed {
		resp, changed, err = c.unspliced(ctx, req, resp)
	}
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	upstream.CopyResponseHeader(h, resp.Header)
	out := &coalesce.Response{
		Status:      resp.StatusCode,
		Header:      h,
		EventStream: isEventStream(resp.Header),
		Body:        resp.Body,
		Changed:     changed,
	}
	if span := failover.AttemptSpan(resp); span != nil && span.IsRecording() {
		if req.Upstream != "" {
			span.SetAttributes(telemetry.GenAIRequestModel.String(telemetry.Bound(req.Model))) // routed by name, not by model
		}
		out.Finished = func(body []byte, u wire.Usage) { telemetry.SetUsage(span, body, u.Prompt, u.Completion, u.Known) }
	}
	if !out.EventStream || out.Status != http.StatusOK {
		out.Kept = entry.KeepHeaders(resp.Header) // a relayed stream's entry is assembled, with headers of its own
	}
	return out, nil
}

// sendPrepared sends a forwarded call whose body may have been prepared
// from the client's original (nil: it was not), with the flight's rules
// for an upstream that refuses the prepared stream_options.
func (s *Server) sendPrepared(ctx context.Context, rt route, req upstream.Request, original []byte) (*http.Response, error) {
	if original != nil && s.splice.skip(rt.pin, s.serving(apiOf(req.Path), rt.model)) {
		req.Body, original = original, nil
	}
	resp, err := s.sendRoute(ctx, rt, req)
	if err != nil || original == nil {
		return resp, err
	}
	resp, _, err = caller{s}.unspliced(ctx, &coalesce.Request{Tenant: req.Tenant, Endpoint: req.Path, Query: req.RawQuery,
		Model: rt.model, Upstream: rt.pin, Header: req.Header, Original: original}, resp)
	return resp, err
}

// unspliced looks at the answer to a prepared body. A 400 whose param
// names stream_options is that upstream's refusal of the splice: the
// client's own body goes to the same upstream, and when that one is not
// refused for stream_options too (then the client's own stream_options is
// at fault, and its answer is the client's), the upstream is remembered as
// refusing.
func (c caller) unspliced(ctx context.Context, req *coalesce.Request, resp *http.Response) (*http.Response, bool, error) {
	s := c.s
	name := resp.Header.Get(failover.UpstreamHeader)
	if resp.StatusCode != http.StatusBadRequest {
		return resp, true, nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRejectBody))
	resp.Body.Close()
	if !refusesStreamOptions(body) {
		resp.Body = io.NopCloser(bytes.NewReader(body)) // another 400: answer it as it came
		return resp, true, nil
	}
	at := req.Upstream
	if name != "" {
		at = name // the upstream that refused, whichever routing chose
	}
	own, err := s.send(ctx, at, req.Model, upstream.Request{Method: http.MethodPost, Path: req.Endpoint, RawQuery: req.Query, Header: req.Header, Body: req.Original, Tenant: tenant.IDOfScope(req.Tenant)})
	if err != nil {
		return nil, false, err
	}
	if own.StatusCode == http.StatusBadRequest {
		b, _ := io.ReadAll(io.LimitReader(own.Body, maxRejectBody))
		own.Body.Close()
		own.Body = io.NopCloser(bytes.NewReader(b))
		if refusesStreamOptions(b) {
			return own, false, nil
		}
	}
	if name != "" && s.splice.refused(name) {
		s.log.WarnContext(ctx, "an upstream rejects stream_options; its streaming answers are stored without usage", "upstream", name)
	}
	return own, false, nil
}

// observer counts flights' upstream calls in metrics and usage.
type observer struct{ s *Server }

var _ coalesce.Observer = observer{}

// Called counts one upstream call by outcome.
func (o observer) Called(req *coalesce.Request, out coalesce.Outcome, err error, d time.Duration) {
	outcome := "error"
	var prompt, completion int
	var answered *entry.Entry
	switch {
	case abandoned(err):
		outcome = "canceled"
	case err != nil:
		outcome = outcomeOf(statusError(err))
	case out.Entry != nil:
		outcome = negcache.Classify(out.Entry.Status).String()
		prompt, completion = out.Entry.PromptTokens, out.Entry.CompletionTokens
		answered = out.Entry
	}
	// req.Tenant is the tenant's Scope: its usage and spend are counted
	// under it, its metrics under the id.
	id := tenant.IDOfScope(req.Tenant)
	o.s.metrics.Upstream(id, req.Model, outcome, d)
	o.s.metrics.Tokens(id, req.Model, prompt, completion)
	cost := o.s.chargeCall(req.Tenant, req.Model, answered, o.s.estimateCost(req.Model, req.Estimate))
	o.s.settleBudget(context.Background(), req.Tenant, req.Tokens, cost)
}

// TookOver counts a lock taken over from a leader that left.
func (o observer) TookOver() { o.s.metrics.LockTakeover() }

// outcomeOf names a failed call's outcome for metrics.
func outcomeOf(e *apiError) string {
	switch {
	case e == errUpstreamAuth:
		return negcache.UpstreamAuth.String()
	case e.Code == errUpstreamTimeout.Code:
		return "timeout"
	case e == errClientClosed:
		return "canceled"
	}
	return "error"
}
