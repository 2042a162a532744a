package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/telemetry"
)

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
