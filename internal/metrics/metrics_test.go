package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestGuardBoundsModelLabels(t *testing.T) {
	g := newGuard(3, 100)
	for i := range 10 {
		g.label("a", fmt.Sprintf("model-%d", i))
	}
	if got := g.label("a", "model-1"); got != "model-1" {
		t.Errorf("known value = %q", got)
	}
	if got := g.label("a", "model-9"); got != "other" {
		t.Errorf("value past the bound = %q; want other", got)
	}
	if got := g.label("a", ""); got != "none" {
		t.Errorf("empty = %q", got)
	}
}

// One tenant's junk model names use up that tenant's budget only: another
// tenant's first real model is still labelled by its name, and so is every
// configured name, whoever sends it.
func TestOneTenantsModelNamesLeaveOthersTheirLabels(t *testing.T) {
	m := New()
	m.KnownModels([]string{"gpt-4o-mini", "gpt-4o*"})
	for i := range 200 {
		m.Upstream("junk", fmt.Sprintf("junk-%d", i), "answer", time.Millisecond)
	}
	m.Upstream("b", "llama-3-70b", "answer", time.Millisecond)
	m.Upstream("junk", "gpt-4o-mini", "answer", time.Millisecond)
	for _, tt := range []struct{ tenant, model string }{{"b", "llama-3-70b"}, {"junk", "gpt-4o-mini"}, {"junk", "other"}} {
		if got := testutil.ToFloat64(m.UpstreamCounter(tt.tenant, tt.model, "answer")); got == 0 {
			t.Errorf("no series for tenant %s, model %s", tt.tenant, tt.model)
		}
	}
	if got := testutil.ToFloat64(m.UpstreamCounter("junk", "other", "answer")); got != 200-modelsPerTenant {
		t.Errorf("junk's names past its budget: %v as other; want %d", got, 200-modelsPerTenant)
	}
	if got := testutil.ToFloat64(m.UpstreamCounter("junk", "gpt-4o*", "answer")); got != 0 {
		t.Error("a glob became a known name")
	}
}

// 10,000 distinct names, from one tenant or from many, keep the model
// label's series bounded.
func TestModelSeriesStayBounded(t *testing.T) {
	m := New()
	for i := range 10000 {
		m.Tokens(fmt.Sprintf("tenant-%d", i%500), fmt.Sprintf("model-%d", i), 1, 1)
	}
	for i := range 10000 {
		m.Tokens("one", fmt.Sprintf("one-%d", i), 1, 1)
	}
	n := testutil.CollectAndCount(m.tokens)
	// Two series (prompt, completion) per pair, plus "other" per tenant.
	if limit := 2 * (maxModelSeries + 501); n > limit {
		t.Errorf("%d corral_tokens_total series after 20,000 distinct names; want at most %d", n, limit)
	}
}

func TestNilMetricsIsSafe(t *testing.T) {
	var m *Metrics
	m.Request("t", "/x", "HIT", 200, time.Millisecond)
	m.Upstream("t", "m", "answer", time.Millisecond)
	m.Tokens("t", "m", 1, 2)
	m.EnableRedis()
}

func TestExposition(t *testing.T) {
	m := New()
	m.EnableRedis()
	m.Request("acme", "/chat/completions", "HIT", 200, time.Millisecond)
	m.Tokens("acme", "gpt-4o-mini", 3, 4)
	m.RedisUp(false)
	if got := testutil.ToFloat64(m.requests.WithLabelValues("acme", "/chat/completions", "HIT", "200")); got != 1 {
		t.Errorf("requests = %v", got)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body, _ := io.ReadAll(rec.Body)
	for _, want := range []string{
		`corral_requests_total{cache="HIT",code="200",endpoint="/chat/completions",tenant="acme"} 1`,
		`corral_tokens_total{model="gpt-4o-mini",tenant="acme",type="completion"} 4`,
		`corral_redis_up 0`,
		`go_goroutines`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("exposition lacks %q", want)
		}
	}
}

func TestCountLogDropsReadsTheSink(t *testing.T) {
	m := New()
	var n uint64 = 7
	m.CountLogDrops(func() uint64 { return n })
	n = 9
	want := "# HELP corral_log_lines_dropped_total Log lines dropped because the log's reader fell behind (the asynchronous log sink was full); requests never wait for the log.\n# TYPE corral_log_lines_dropped_total counter\ncorral_log_lines_dropped_total 9\n"
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "corral_log_lines_dropped_total"); err != nil {
		t.Fatal(err)
	}
}

// TestUpstreamInfo: every upstream has one info series naming its API and
// provider, beside its state series, read afresh at each scrape.
func TestUpstreamInfo(t *testing.T) {
	m := New()
	ups := []UpstreamState{
		{Name: "claude", API: "anthropic", Provider: "anthropic", State: "closed"},
		{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", State: "open"},
	}
	m.EnableUpstreams(func() []UpstreamState { return ups })
	want := `
# HELP corral_upstream_info 1 for each configured upstream, naming its API (openai, anthropic) and provider (openai, anthropic, azure, bedrock, vertex).
# TYPE corral_upstream_info gauge
corral_upstream_info{api="anthropic",provider="anthropic",upstream="claude"} 1
corral_upstream_info{api="anthropic",provider="bedrock",upstream="bedrock-us"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "corral_upstream_info"); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(m.up.states, "corral_upstream_state"); n != 2*len(upstreamStates) {
		t.Errorf("corral_upstream_state series = %d; want %d (unchanged: one per upstream and state)", n, 2*len(upstreamStates))
	}
	ups = ups[:1] // a reload dropped bedrock-us
	want = `
# HELP corral_upstream_info 1 for each configured upstream, naming its API (openai, anthropic) and provider (openai, anthropic, azure, bedrock, vertex).
# TYPE corral_upstream_info gauge
corral_upstream_info{api="anthropic",provider="anthropic",upstream="claude"} 1
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "corral_upstream_info"); err != nil {
		t.Errorf("after a reload: %v", err)
	}
}
