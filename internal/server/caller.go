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

// Call sends the flight's body. Some OpenAI-compatible servers reject the
// prepared body (stream_options): when one does, the client's own body is
// sent instead, and no body is prepared again.
func (c caller) Call(ctx context.Context, req *coalesce.Request) (*coalesce.Response, error) {
	s := c.s
	resp, err := s.send(ctx, req.Upstream, req.Model, upstream.Request{Method: http.MethodPost, Path: req.Endpoint, RawQuery: req.Query, Header: req.Header, Body: req.Body})
	changed := req.Original != nil
	if err == nil && changed && resp.StatusCode == http.StatusBadRequest {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxRejectBody))
		resp.Body.Close()
		if bytes.Contains(body, []byte("stream_options")) {
			s.noSplice.Store(true)
			s.log.WarnContext(ctx, "the upstream rejects stream_options; streaming answers will be stored without usage")
			changed = false
			resp, err = s.send(ctx, req.Upstream, req.Model, upstream.Request{Method: http.MethodPost, Path: req.Endpoint, RawQuery: req.Query, Header: req.Header, Body: req.Original})
		} else {
			resp.Body = io.NopCloser(bytes.NewReader(body)) // another 400: answer it as it came
		}
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
	o.s.metrics.Upstream(req.Tenant, req.Model, outcome, d)
	o.s.metrics.Tokens(req.Tenant, req.Model, prompt, completion)
	cost := o.s.chargeCall(req.Tenant, req.Model, answered)
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
