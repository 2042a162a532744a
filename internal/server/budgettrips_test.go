package server

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/spend"
)

// TestBudgetRedisTrips: a budgeted tenant's hit sends Redis only the
// cache's own commands (none on a budget key), and its upstream call
// makes at most one budget round trip before the call and one after it
// (the settlement), each one script run.
func TestBudgetRedisTrips(t *testing.T) {
	var calls atomic.Int64
	h, rs := distributed(t, 1, withPrices, withCapped(1000*spend.Cent, &calls))
	// Load the scripts first: a script's very first run is an EVALSHA
	// answered NOSCRIPT, then an EVAL.
	if a := send(context.Background(), h.gw.URL, cappedKey, cappedChat("load the scripts")); a.status != 200 {
		t.Fatalf("warm-up: %d %s", a.status, a.body)
	}
	mon := startMonitor(t, rs)
	prompt := cappedChat("a budgeted hit")
	phash := promptHash(t, "capped", prompt)
	budget := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if strings.Contains(l, phash) || strings.Contains(l, " lua]") || !strings.Contains(l, `] "`) {
				continue
			}
			_, rest, _ := strings.Cut(l, `] "`)
			name, _, _ := strings.Cut(rest, `"`)
			out = append(out, strings.ToLower(name))
		}
		return out
	}
	step := func(name, want string) []string {
		t.Helper()
		mon.mark(t, name)
		if _, ok := mon.until(t, name, 5*time.Second); !ok {
			t.Fatalf("mark %s never came", name)
		}
		a := send(context.Background(), h.gw.URL, cappedKey, prompt)
		if a.status != 200 || a.header.Get("X-Corral-Cache") != want {
			t.Fatalf("%s: %d %s %s", name, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
		mon.mark(t, name+"-end")
		lines, ok := mon.until(t, name+"-end", 5*time.Second)
		if !ok {
			t.Fatalf("mark %s-end never came", name)
		}
		return budget(lines)
	}
	miss := step("miss", cacheMiss)
	t.Logf("budget commands around the upstream call: %q", miss)
	if calls.Load() != 2 {
		t.Fatalf("upstream calls = %d; want 2", calls.Load())
	}
	if len(miss) == 0 || len(miss) > 2 {
		t.Errorf("budget commands around one upstream call = %q; want one before it (and at most one settlement)", miss)
	}
	for _, c := range miss {
		if c != "evalsha" {
			t.Errorf("budget command %q around the upstream call; want script runs only (%q)", c, miss)
		}
	}
	if hit := step("hit", "HIT"); len(hit) != 0 {
		t.Errorf("commands other than the cache's on a budgeted hit = %q; want none", hit)
	}
}
