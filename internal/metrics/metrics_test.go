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
	g := newGuard(3)
	for i := range 10 {
		g.label(fmt.Sprintf("model-%d", i))
	}
	if got := g.label("model-1"); got != "model-1" {
		t.Errorf("known value = %q", got)
	}
	if got := g.label("model-9"); got != "other" {
		t.Errorf("value past the bound = %q; want other", got)
	}
	if got := g.label(""); got != "none" {
		t.Errorf("empty = %q", got)
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
