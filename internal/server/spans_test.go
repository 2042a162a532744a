package server

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/failover"
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
		"corral.upstream": upstream, "corral.upstream.provider": "openai", "corral.attempt": int64(n), "corral.outcome": "answer",
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
