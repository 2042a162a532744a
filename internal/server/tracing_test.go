package server

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/telemetry"
)

// TestTraceMissAndHit: a MISS continues the client's trace and shows the
// lookup, the flight and the upstream attempt with the GenAI attributes;
// the upstream receives the attempt's traceparent; a HIT shows the
// lookup and the tokens saved, and nothing upstream.
func TestTraceMissAndHit(t *testing.T) {
	l := newSpanLog()
	var logs logtest.Buffer
	h := newHarness(t, traced(l), withServer(func(so *Options) {
		so.Logger = slog.New(telemetry.LogHandler(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	}))
	prompt := "tracing the secret recipe"
	body := chatBody(prompt)
	miss := send(context.Background(), h.gw.URL, acmeKey, body,
		"Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01", "Tracestate", "vendor=opaque")
	if miss.status != 200 || miss.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("miss: %d %s", miss.status, miss.header.Get("X-Corral-Cache"))
	}
	spans := l.endedN(t, "POST /v1/chat/completions", 1)
	tid, _ := trace.TraceIDFromHex(clientTraceID)
	spans = inTrace(spans, tid)

	srv := one(t, spans, "POST /v1/chat/completions")
	if srv.SpanKind() != trace.SpanKindServer || srv.Parent().SpanID().String() != clientSpanID || !srv.Parent().IsRemote() {
		t.Errorf("server span: kind %v parent %v; want a server span continuing the client's", srv.SpanKind(), srv.Parent().SpanID())
	}
	if got := srv.SpanContext().TraceState().String(); got != "vendor=opaque" {
		t.Errorf("tracestate = %q; want the client's", got)
	}
	wantAttrs(t, srv, map[string]any{
		"http.request.method": "POST", "url.path": "/v1/chat/completions", "http.route": "/v1/chat/completions",
		"http.response.status_code": int64(200), "corral.tenant": "acme", "corral.cache": "MISS",
	})
	lookup := one(t, spans, telemetry.SpanCacheLookup)
	childOf(t, lookup, srv)
	wantAttrs(t, lookup, map[string]any{"corral.cache": "MISS"})
	fl := one(t, spans, telemetry.SpanFlight)
	childOf(t, fl, srv)
	wantAttrs(t, fl, map[string]any{"corral.flight.role": "leader"})
	if len(fl.Links()) != 0 {
		t.Errorf("a leader's flight links %d spans; want none", len(fl.Links()))
	}
	att := one(t, spans, "chat gpt-4o-mini")
	childOf(t, att, fl)
	if att.SpanKind() != trace.SpanKindClient {
		t.Errorf("attempt kind %v; want client", att.SpanKind())
	}
	in, out := usageOf(t, miss.body)
	wantAttrs(t, att, answered("default", 1, in, out))
	if len(spans) != 4 {
		t.Errorf("the MISS's trace has spans %v; want the server span, lookup, flight, attempt", spanNames(spans))
	}
	// The upstream saw the attempt's span as its parent, and the tracestate.
	seen := h.seenHeaders()
	if len(seen) != 1 {
		t.Fatalf("upstream calls = %d; want 1", len(seen))
	}
	if got, want := seen[0].Get("Traceparent"), "00-"+clientTraceID+"-"+att.SpanContext().SpanID().String()+"-01"; got != want {
		t.Errorf("upstream traceparent = %q; want %q", got, want)
	}
	if got := seen[0].Get("Tracestate"); got != "vendor=opaque" {
		t.Errorf("upstream tracestate = %q", got)
	}
	// The access log line names the trace and the server span.
	var line struct{ TraceID, SpanID string }
	for _, raw := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		var v map[string]any
		if json.Unmarshal([]byte(raw), &v) == nil && v["msg"] == "request" {
			line.TraceID, _ = v["trace_id"].(string)
			line.SpanID, _ = v["span_id"].(string)
		}
	}
	if line.TraceID != clientTraceID || line.SpanID != srv.SpanContext().SpanID().String() {
		t.Errorf("access log trace_id=%q span_id=%q; want %s %s", line.TraceID, line.SpanID, clientTraceID, srv.SpanContext().SpanID())
	}

	hit := send(context.Background(), h.gw.URL, acmeKey, body)
	if hit.header.Get("X-Corral-Cache") != cacheHit {
		t.Fatalf("second request: %s", hit.header.Get("X-Corral-Cache"))
	}
	all := l.endedN(t, "POST /v1/chat/completions", 2)
	hsrv := named(all, "POST /v1/chat/completions")[1]
	if hsrv.Parent().IsValid() {
		t.Errorf("a request without traceparent has parent %v; want a root span", hsrv.Parent().SpanID())
	}
	hspans := inTrace(all, hsrv.SpanContext().TraceID())
	wantAttrs(t, hsrv, map[string]any{
		"http.request.method": "POST", "url.path": "/v1/chat/completions", "http.route": "/v1/chat/completions",
		"http.response.status_code": int64(200), "corral.tenant": "acme", "corral.cache": "HIT", "corral.tokens_saved": int64(in + out),
	})
	wantAttrs(t, one(t, hspans, telemetry.SpanCacheLookup), map[string]any{"corral.cache": "HIT"})
	if len(hspans) != 2 {
		t.Errorf("the HIT's trace has spans %v; want the server span and the lookup", spanNames(hspans))
	}
	if n := len(h.seenHeaders()); n != 1 {
		t.Errorf("upstream calls = %d after a hit; want 1", n)
	}
	noSecrets(t, all, acmeKey, upstreamKey, prompt, "secret recipe")
}

// TestTraceFailover: a failover shows two attempts under the flight, the
// failing one with its status and the answering one with its usage.
func TestTraceFailover(t *testing.T) {
	l := newSpanLog()
	primary := newFakeUpstream(t, "primary", mockllm.Options{})
	secondary := newFakeUpstream(t, "secondary", mockllm.Options{})
	primary.status.Store(http.StatusServiceUnavailable)
	h := newHarness(t, tracedFailover(l, primary, secondary))
	a := send(context.Background(), h.gw.URL, acmeKey, chatBody("fail over, traced"))
	if a.status != 200 || a.header.Get("X-Corral-Upstream") != "secondary" {
		t.Fatalf("answer: %d from %q", a.status, a.header.Get("X-Corral-Upstream"))
	}
	spans := l.endedN(t, "POST /v1/chat/completions", 1)
	fl := one(t, spans, telemetry.SpanFlight)
	atts := named(spans, "chat gpt-4o-mini")
	if len(atts) != 2 {
		t.Fatalf("%d attempt spans; want 2", len(atts))
	}
	for _, s := range atts {
		childOf(t, s, fl)
	}
	first, second := atts[0], atts[1]
	if attrs(first)["corral.upstream"] != "primary" {
		first, second = second, first
	}
	wantAttrs(t, first, map[string]any{
		"corral.upstream": "primary", "corral.upstream.provider": "openai", "corral.attempt": int64(1), "corral.outcome": "retry",
		"gen_ai.provider.name": "openai", "gen_ai.system": "openai", "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
		"http.response.status_code": int64(503), "error.type": "503",
	})
	if first.Status().Code != codes.Error {
		t.Errorf("the failed attempt's status is %v; want Error", first.Status().Code)
	}
	in, out := usageOf(t, a.body)
	wantAttrs(t, second, answered("secondary", 2, in, out))
	if primary.calls.Load() != 1 || secondary.calls.Load() != 1 {
		t.Errorf("calls: primary %d, secondary %d; want 1 each", primary.calls.Load(), secondary.calls.Load())
	}
	noSecrets(t, spans, acmeKey, primary.key, secondary.key, "fail over, traced")
}

// TestTraceStream: a streamed MISS shows the stream relay with its first
// token event, and the attempt's usage from the stream's usage chunk.
func TestTraceStream(t *testing.T) {
	l := newSpanLog()
	h := newHarness(t, traced(l), func(o *harnessOptions) { o.mock.StreamChunks = 4 })
	prompt := "stream the secret"
	a := send(context.Background(), h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`)
	if a.status != 200 || sseText(t, a.body) != "mock reply to: "+prompt {
		t.Fatalf("stream: %d %q", a.status, a.body)
	}
	spans := l.until(t, "the server and attempt spans", func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		return len(named(ended, "POST /v1/chat/completions")) == 1 && len(named(ended, "chat gpt-4o-mini")) == 1
	})
	srv := one(t, spans, "POST /v1/chat/completions")
	st := one(t, spans, telemetry.SpanStream)
	childOf(t, st, srv)
	evs := st.Events()
	if len(evs) != 1 || evs[0].Name != telemetry.EventFirstToken {
		t.Fatalf("stream events = %v; want one %s", evs, telemetry.EventFirstToken)
	}
	if !evs[0].Time.After(st.StartTime()) || evs[0].Time.After(st.EndTime()) {
		t.Errorf("first token at %v, outside the stream's %v..%v", evs[0].Time, st.StartTime(), st.EndTime())
	}
	n := strings.Count(a.body, "data: ")
	wantAttrs(t, st, map[string]any{"corral.stream.events": int64(n)})
	// The mock counts words: the prompt's 3, the reply's 3 more.
	wantAttrs(t, one(t, spans, "chat gpt-4o-mini"), answered("default", 1, 3, 6))
	noSecrets(t, spans, acmeKey, upstreamKey, prompt)
}
