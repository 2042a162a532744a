package failover

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// cloudRouter is an anthropic router over anthropic's own API (a, which
// fails with 500), then Bedrock (b), then Vertex (c), traced into rec.
func cloudRouter(t *testing.T, rec *tracetest.SpanRecorder) *Router {
	t.Helper()
	fakes := []*fakeUpstream{newFake(t, 500, nil), newFake(t, 200, nil), newFake(t, 200, nil)}
	providers := []string{"anthropic", "bedrock", "vertex"}
	var ms []*pool.Member
	clients := map[string]Doer{}
	for i, f := range fakes {
		name := string(rune('a' + i))
		ms = append(ms, &pool.Member{Name: name, API: "anthropic", Provider: providers[i], Priority: i, Weight: 1})
		c, err := upstream.New(upstream.Options{BaseURL: f.srv.URL + "/v1", Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	return New(&Set{Pool: pool.New(ms, pool.Options{Seed: 1}), Clients: clients}, Options{Timeout: 10 * time.Second, Tracer: tp.Tracer("test")})
}

// TestProviderNamedOnTheAnswer: the answer names its upstream and that
// upstream's provider (the upstream's own headers of those names are
// dropped), by failover and by name, and each attempt's span carries the
// provider both as the upstreams file names it and as the OpenTelemetry
// GenAI conventions do.
func TestProviderNamedOnTheAnswer(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	r := cloudRouter(t, rec)
	resp, err := r.Do(context.Background(), "anthropic", "claude-x", upstream.Request{Method: "POST", Path: "/messages", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := http.Header{UpstreamHeader: {"b"}, ProviderHeader: {"bedrock"}}
	if got := (http.Header{UpstreamHeader: resp.Header.Values(UpstreamHeader), ProviderHeader: resp.Header.Values(ProviderHeader)}); !cmp.Equal(got, want) {
		t.Errorf("failover answer names %v; want %v", got, want)
	}
	resp, err = r.DoAt(context.Background(), "c", upstream.Request{Method: "GET", Path: "/models"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want = http.Header{UpstreamHeader: {"c"}, ProviderHeader: {"vertex"}}
	if got := (http.Header{UpstreamHeader: resp.Header.Values(UpstreamHeader), ProviderHeader: resp.Header.Values(ProviderHeader)}); !cmp.Equal(got, want) {
		t.Errorf("pinned answer names %v; want %v", got, want)
	}

	type named struct{ Upstream, Provider, GenAI, System string }
	var got []named
	for _, s := range rec.Ended() {
		a := map[string]string{}
		for _, kv := range s.Attributes() {
			a[string(kv.Key)] = kv.Value.Emit()
		}
		got = append(got, named{a["corral.upstream"], a["corral.upstream.provider"], a["gen_ai.provider.name"], a["gen_ai.system"]})
	}
	wantSpans := []named{
		{"a", "anthropic", "anthropic", "anthropic"},
		{"b", "bedrock", "aws.bedrock", "aws.bedrock"},
		{"c", "vertex", "gcp.vertex_ai", "gcp.vertex_ai"},
	}
	if diff := cmp.Diff(wantSpans, got); diff != "" {
		t.Errorf("attempt spans (-want +got):\n%s", diff)
	}
}
