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

// TestModelNames: with a cloud among an API's upstreams, the names
// clients may send are the configuration's (alias keys, then models, of
// every upstream of that API, globs left out, each once); without one
// the list is the upstreams' to give.
func TestModelNames(t *testing.T) {
	ms := []*pool.Member{
		{Name: "claude", API: "anthropic", Provider: "anthropic", Models: []string{"claude-*", "claude-sonnet-4-5"}, Weight: 1},
		{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", Aliases: []string{"claude-sonnet-4-5*", "claude-haiku-4-5", "claude-opus-4-1"},
			Models: []string{"claude-sonnet-4-5*", "claude-haiku-4-5", "claude-opus-4-1"}, Weight: 1},
		{Name: "vertex-eu", API: "anthropic", Provider: "vertex", Aliases: []string{"claude-haiku-4-5", "claude-[0-9]"}, Models: []string{"claude-haiku-4-5", "claude-3-haiku?"}, Weight: 1},
		{Name: "openai", API: "openai", Provider: "openai", Models: []string{"gpt-4o"}, Weight: 1},
	}
	r := New(&Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]Doer{}}, Options{})
	tests := []struct {
		give           string
		want           []string
		wantFromConfig bool
	}{
		{give: "anthropic", want: []string{"claude-sonnet-4-5", "claude-haiku-4-5", "claude-opus-4-1"}, wantFromConfig: true},
		{give: "openai", want: nil, wantFromConfig: false},
	}
	for _, tt := range tests {
		got, fromConfig := r.ModelNames(tt.give)
		if !cmp.Equal(got, tt.want) || fromConfig != tt.wantFromConfig {
			t.Errorf("ModelNames(%q) = %q, %v; want %q, %v", tt.give, got, fromConfig, tt.want, tt.wantFromConfig)
		}
	}
	only := New(&Set{Pool: pool.New([]*pool.Member{{Name: "az", API: "openai", Provider: "azure", Models: []string{"gpt-4o*"}, Weight: 1}}, pool.Options{}), Clients: map[string]Doer{}}, Options{})
	if got, fromConfig := only.ModelNames("openai"); got == nil || len(got) != 0 || !fromConfig {
		t.Errorf("an Azure upstream serving globs only: %q, %v; want an empty list from the configuration", got, fromConfig)
	}
}
