package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/telemetry"
)

// spanLog is an SDK span processor that keeps every span, so tests can
// wait, on a channel, for the spans they expect to have ended, and for a
// span to have started.
type spanLog struct {
	mu      sync.Mutex // protects ended, started, changed
	ended   []sdktrace.ReadOnlySpan
	started []string
	changed chan struct{} // closed and replaced on every change
}

func (l *spanLog) OnStart(_ context.Context, s sdktrace.ReadWriteSpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.started = append(l.started, s.Name())
	l.notifyLocked()
}

func (l *spanLog) OnEnd(s sdktrace.ReadOnlySpan) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.ended = append(l.ended, s)
	l.notifyLocked()
}

func (l *spanLog) notifyLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

func (l *spanLog) Shutdown(context.Context) error   { return nil }
func (l *spanLog) ForceFlush(context.Context) error { return nil }

var _ sdktrace.SpanProcessor = (*spanLog)(nil)

// until waits until ok holds of the spans started and ended so far, and
// returns the ended ones.
func (l *spanLog) until(t *testing.T, what string, ok func(started []string, ended []sdktrace.ReadOnlySpan) bool) []sdktrace.ReadOnlySpan {
	t.Helper()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for {
		l.mu.Lock()
		started, ended, changed := append([]string(nil), l.started...), append([]sdktrace.ReadOnlySpan(nil), l.ended...), l.changed
		l.mu.Unlock()
		if ok(started, ended) {
			return ended
		}
		select {
		case <-changed:
		case <-timeout.C:
			t.Fatalf("waiting for %s: %d spans ended: %v", what, len(ended), spanNames(ended))
		}
	}
}

// ended waits until n spans called name have ended.
func (l *spanLog) endedN(t *testing.T, name string, n int) []sdktrace.ReadOnlySpan {
	t.Helper()
	return l.until(t, fmt.Sprintf("%d %q spans", n, name), func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		return len(named(ended, name)) >= n
	})
}

func spanNames(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// one is the only span called name among spans.
func one(t *testing.T, spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	t.Helper()
	got := named(spans, name)
	if len(got) != 1 {
		t.Fatalf("%d spans called %q; want 1 (spans: %v)", len(got), name, spanNames(spans))
	}
	return got[0]
}

// inTrace are the spans of one trace.
func inTrace(spans []sdktrace.ReadOnlySpan, id trace.TraceID) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.SpanContext().TraceID() == id {
			out = append(out, s)
		}
	}
	return out
}

// attrs is a span's attributes as a map, for exact comparison.
func attrs(s sdktrace.ReadOnlySpan) map[string]any {
	out := map[string]any{}
	for _, kv := range s.Attributes() {
		out[string(kv.Key)] = kv.Value.AsInterface()
	}
	return out
}

func wantAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]any) {
	t.Helper()
	if diff := cmp.Diff(want, attrs(s)); diff != "" {
		t.Errorf("span %q attributes (-want +got):\n%s", s.Name(), diff)
	}
}

func childOf(t *testing.T, child, parent sdktrace.ReadOnlySpan) {
	t.Helper()
	if child.Parent().SpanID() != parent.SpanContext().SpanID() || child.SpanContext().TraceID() != parent.SpanContext().TraceID() {
		t.Errorf("span %q is not a child of %q", child.Name(), parent.Name())
	}
}

// traced is a harness option: every instance traces into one spanLog
// (as several gateways export to one collector).
func traced(l *spanLog) func(*harnessOptions) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(l))
	return withServer(func(so *Options) { so.Tracing = tp })
}

// tracedFailover traces into l over a router that tries primary, then
// secondary, and traces their attempts.
func tracedFailover(l *spanLog, primary, secondary *fakeUpstream) func(*harnessOptions) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(l))
	return withServer(func(so *Options) {
		so.Upstreams = routerWith(failover.Options{Timeout: 10 * time.Second, Tracer: telemetry.Tracer(tp)},
			upSpec{f: primary, priority: 0, weight: 1}, upSpec{f: secondary, priority: 1, weight: 1})
		so.Tracing = tp
	})
}

// answered is the attributes of the attempt n at upstream that answered
// gpt-4o-mini's chat call with in and out tokens.
func answered(upstream string, n, in, out int) map[string]any {
	return map[string]any{
		"corral.upstream": upstream, "corral.attempt": int64(n), "corral.outcome": "answer",
		"gen_ai.provider.name": "openai", "gen_ai.system": "openai", "gen_ai.operation.name": "chat",
		"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini",
		"gen_ai.usage.input_tokens": int64(in), "gen_ai.usage.output_tokens": int64(out),
		"http.response.status_code": int64(200),
	}
}

func newSpanLog() *spanLog { return &spanLog{changed: make(chan struct{})} }

// noSecrets fails when a key or prompt text is anywhere in the spans:
// names, attributes, events, links, statuses.
func noSecrets(t *testing.T, spans []sdktrace.ReadOnlySpan, secrets ...string) {
	t.Helper()
	for _, s := range spans {
		texts := []string{s.Name(), s.Status().Description}
		kvs := append([]attribute.KeyValue(nil), s.Attributes()...)
		for _, e := range s.Events() {
			texts = append(texts, e.Name)
			kvs = append(kvs, e.Attributes...)
		}
		for _, l := range s.Links() {
			kvs = append(kvs, l.Attributes...)
		}
		for _, kv := range kvs {
			texts = append(texts, string(kv.Key), kv.Value.Emit())
		}
		for _, text := range texts {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("span %q carries %q", s.Name(), secret)
				}
			}
		}
	}
}

// usageOf reads an answer's usage.
func usageOf(t *testing.T, body string) (prompt, completion int) {
	t.Helper()
	var v struct {
		Usage struct {
			Prompt     int `json:"prompt_tokens"`
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(body), &v); err != nil || v.Usage.Prompt == 0 {
		t.Fatalf("answer without usage: %v %s", err, body)
	}
	return v.Usage.Prompt, v.Usage.Completion
}

const (
	clientTraceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	clientSpanID  = "00f067aa0ba902b7"
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
		"corral.upstream": "primary", "corral.attempt": int64(1), "corral.outcome": "retry",
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

// TestTraceFollowerOnAnotherInstance: with two instances on one Redis, a
// request that waits for the other instance's leader shows a follower's
// flight and lock wait, both linked to the leader's flight span.
func TestTraceFollowerOnAnotherInstance(t *testing.T) {
	l := newSpanLog()
	gate := make(chan struct{})
	h, _ := distributed(t, 2, traced(l), func(o *harnessOptions) { o.gate = gate })
	body := chatBody("one leader, traced")
	leader := make(chan answer, 1)
	go func() { leader <- send(context.Background(), h.gws[0].URL, acmeKey, body) }()
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	follower := make(chan answer, 1)
	go func() { follower <- send(context.Background(), h.gws[1].URL, acmeKey, body) }()
	l.until(t, "the follower's lock wait", func(started []string, _ []sdktrace.ReadOnlySpan) bool {
		return strings.Contains(strings.Join(started, ","), telemetry.SpanLockWait)
	})
	close(gate)
	la, fa := <-leader, <-follower
	if la.header.Get("X-Corral-Cache") != cacheMiss || fa.header.Get("X-Corral-Cache") != cacheCoalesced || fa.body != la.body {
		t.Fatalf("leader %s, follower %s", la.header.Get("X-Corral-Cache"), fa.header.Get("X-Corral-Cache"))
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
	spans := l.endedN(t, "POST /v1/chat/completions", 2)
	lf, ff := leaderAndFollower(t, spans)
	if lf.SpanContext().TraceID() == ff.SpanContext().TraceID() {
		t.Fatal("the two requests share a trace; want one each")
	}
	links := ff.Links()
	if len(links) != 1 || links[0].SpanContext.SpanID() != lf.SpanContext().SpanID() || links[0].SpanContext.TraceID() != lf.SpanContext().TraceID() {
		t.Errorf("the follower's flight links %v; want the leader's flight span %v", links, lf.SpanContext().SpanID())
	}
	wait := one(t, spans, telemetry.SpanLockWait)
	childOf(t, wait, ff)
	wantAttrs(t, wait, map[string]any{"corral.lock.result": "answered"})
	if wl := wait.Links(); len(wl) != 1 || wl[0].SpanContext.SpanID() != lf.SpanContext().SpanID() {
		t.Errorf("the lock wait links %v; want the leader's flight span", wl)
	}
	fsrv := one(t, inTrace(spans, ff.SpanContext().TraceID()), "POST /v1/chat/completions")
	in, out := usageOf(t, fa.body)
	wantAttrs(t, fsrv, map[string]any{
		"http.request.method": "POST", "url.path": "/v1/chat/completions", "http.route": "/v1/chat/completions",
		"http.response.status_code": int64(200), "corral.tenant": "acme", "corral.cache": "COALESCED", "corral.tokens_saved": int64(in + out),
	})
	if got := named(inTrace(spans, ff.SpanContext().TraceID()), "chat gpt-4o-mini"); len(got) != 0 {
		t.Errorf("the follower's trace has %d upstream attempts; want none", len(got))
	}
	noSecrets(t, spans, acmeKey, upstreamKey, "one leader, traced")
}

// leaderAndFollower are the two flight spans among spans, the leader's
// and the follower's, each with exactly its role.
func leaderAndFollower(t *testing.T, spans []sdktrace.ReadOnlySpan) (leader, follower sdktrace.ReadOnlySpan) {
	t.Helper()
	flights := named(spans, telemetry.SpanFlight)
	if len(flights) != 2 {
		t.Fatalf("%d flight spans; want 2", len(flights))
	}
	leader, follower = flights[0], flights[1]
	if attrs(leader)["corral.flight.role"] != "leader" {
		leader, follower = follower, leader
	}
	wantAttrs(t, leader, map[string]any{"corral.flight.role": "leader"})
	wantAttrs(t, follower, map[string]any{"corral.flight.role": "follower"})
	return leader, follower
}

// renderTree prints one trace as an indented tree, children in start
// order, with each span's duration, attributes, events and links: what
// the README shows of a real request (go test -v -run TestTraceTree).
func renderTree(spans []sdktrace.ReadOnlySpan) string {
	slices.SortFunc(spans, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	kids := map[trace.SpanID][]sdktrace.ReadOnlySpan{}
	ids := map[trace.SpanID]bool{}
	for _, s := range spans {
		ids[s.SpanContext().SpanID()] = true
	}
	var roots []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if p := s.Parent().SpanID(); ids[p] {
			kids[p] = append(kids[p], s)
		} else {
			roots = append(roots, s)
		}
	}
	var b strings.Builder
	var walk func(s sdktrace.ReadOnlySpan, depth int)
	walk = func(s sdktrace.ReadOnlySpan, depth int) {
		pad := strings.Repeat("  ", depth)
		kind := ""
		if k := s.SpanKind(); k == trace.SpanKindServer || k == trace.SpanKindClient {
			kind = " (" + k.String() + ")"
		}
		fmt.Fprintf(&b, "%s%s%s  %v\n", pad, s.Name(), kind, s.EndTime().Sub(s.StartTime()).Round(time.Microsecond))
		kvs := slices.Clone(s.Attributes())
		slices.SortFunc(kvs, func(x, y attribute.KeyValue) int { return strings.Compare(string(x.Key), string(y.Key)) })
		for _, kv := range kvs {
			fmt.Fprintf(&b, "%s    %s = %s\n", pad, kv.Key, kv.Value.Emit())
		}
		for _, e := range s.Events() {
			fmt.Fprintf(&b, "%s    event %s at +%v\n", pad, e.Name, e.Time.Sub(s.StartTime()).Round(time.Microsecond))
		}
		for _, l := range s.Links() {
			fmt.Fprintf(&b, "%s    link → trace %s span %s\n", pad, l.SpanContext.TraceID(), l.SpanContext.SpanID())
		}
		for _, k := range kids[s.SpanContext().SpanID()] {
			walk(k, depth+1)
		}
	}
	for _, r := range roots {
		walk(r, 0)
	}
	return b.String()
}

// TestTraceTree renders the trace of a streamed MISS in distributed mode
// that failed over from a refusing upstream, and checks the tree's shape.
func TestTraceTree(t *testing.T) {
	l := newSpanLog()
	primary := newFakeUpstream(t, "primary", mockllm.Options{StreamChunks: 3})
	secondary := newFakeUpstream(t, "secondary", mockllm.Options{StreamChunks: 3})
	primary.status.Store(http.StatusTooManyRequests)
	h, _ := distributed(t, 1, tracedFailover(l, primary, secondary))
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"show me a trace"}]}`
	a := send(context.Background(), h.gws[0].URL, acmeKey, body, "Traceparent", "00-"+clientTraceID+"-"+clientSpanID+"-01")
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("stream: %d %s", a.status, a.header.Get("X-Corral-Cache"))
	}
	spans := l.until(t, "the server and attempt spans", func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		return len(named(ended, "POST /v1/chat/completions")) == 1 && len(named(ended, "chat gpt-4o-mini")) == 2
	})
	tid, _ := trace.TraceIDFromHex(clientTraceID)
	tree := renderTree(inTrace(spans, tid))
	t.Logf("trace of a streamed MISS that failed over:\n%s", tree)
	want := []string{
		"POST /v1/chat/completions (server)",
		"  corral.cache.lookup",
		"  corral.flight",
		"    chat gpt-4o-mini (client)",
		"    chat gpt-4o-mini (client)",
		"  corral.stream",
	}
	var got []string
	for _, line := range strings.Split(tree, "\n") {
		trimmed := strings.TrimLeft(line, " ")
		if line == "" || strings.HasPrefix(trimmed, "event ") || strings.HasPrefix(trimmed, "link ") || strings.Contains(trimmed, " = ") {
			continue
		}
		name, _, _ := strings.Cut(trimmed, "  ")
		got = append(got, line[:len(line)-len(trimmed)]+name)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tree shape (-want +got):\n%s", diff)
	}
}

// TestTraceStreamFollowerMirrors: a streaming request that joins another
// instance's live stream shows a lock wait that ended "mirrored", linked
// to the leader's flight, and its own stream relay with a first token.
func TestTraceStreamFollowerMirrors(t *testing.T) {
	l := newSpanLog()
	h, _ := distributed(t, 2, traced(l), slowStream(20, 50*time.Millisecond))
	body := liveBody("mirrored and traced")
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	<-leader.events // the leader's stream is live: a follower now mirrors it
	follower := openStream(t, h.gws[1].URL, acmeKey, body)
	lead, fol := drain(leader), drain(follower)
	if !fol.done || follower.header.Get("X-Corral-Cache") != cacheCoalesced || !lead.done {
		t.Fatalf("follower: %+v %s", fol, follower.header.Get("X-Corral-Cache"))
	}
	spans := l.until(t, "both requests' spans", func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		return len(named(ended, "POST /v1/chat/completions")) == 2 && len(named(ended, "chat gpt-4o-mini")) == 1
	})
	lf, ff := leaderAndFollower(t, spans)
	wait := one(t, spans, telemetry.SpanLockWait)
	childOf(t, wait, ff)
	wantAttrs(t, wait, map[string]any{"corral.lock.result": "mirrored"})
	for _, s := range []sdktrace.ReadOnlySpan{ff, wait} {
		if ls := s.Links(); len(ls) != 1 || ls[0].SpanContext.SpanID() != lf.SpanContext().SpanID() {
			t.Errorf("%s links %v; want the leader's flight span", s.Name(), ls)
		}
	}
	fspans := inTrace(spans, ff.SpanContext().TraceID())
	st := one(t, fspans, telemetry.SpanStream)
	if evs := st.Events(); len(evs) != 1 || evs[0].Name != telemetry.EventFirstToken {
		t.Errorf("the follower's stream events %v; want one first token", evs)
	}
	if wait.EndTime().After(st.StartTime()) {
		t.Errorf("the lock wait ended %v after the follower's stream began: mirroring is not waiting", wait.EndTime().Sub(st.StartTime()))
	}
	noSecrets(t, spans, acmeKey, upstreamKey, "mirrored and traced")
}
