package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestMain lets the test binary serve as the floor proxy: the harness
// starts its own executable with CORRAL_BENCH_ROLE=floor.
func TestMain(m *testing.M) {
	MaybeRunFloor()
	os.Exit(m.Run())
}

// TestSmoke runs the hit scenario end to end with tiny numbers: it builds
// the gateway and the mock, starts them, the floor proxy and (when
// installed) Redis as processes, and checks every side answered. It takes
// a few seconds and starts processes, so it runs only with
// CORRAL_BENCH_SMOKE=1; `go vet ./bench/...` keeps the harness compiling
// in CI otherwise.
func TestSmoke(t *testing.T) {
	if os.Getenv("CORRAL_BENCH_SMOKE") != "1" {
		t.Skip("set CORRAL_BENCH_SMOKE=1 to run the load harness smoke test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var log strings.Builder
	rep, err := Run(ctx, Options{
		Scenarios:      []string{ScenarioHit},
		Reps:           1,
		Duration:       200 * time.Millisecond,
		Warmup:         50 * time.Millisecond,
		AllocBenchtime: "-",
		Log:            &log,
		Tables:         &log,
	})
	t.Log(log.String())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	_, lookErr := exec.LookPath("redis-server")
	wantTargets := []string{"direct", "floor", "corral-memory-hit", "corral-redis-hit"}
	if lookErr != nil {
		wantTargets = wantTargets[:3]
	} else if len(rep.Errors) > 0 {
		t.Errorf("Errors = %q, want none", rep.Errors)
	}
	// The info-level gateway and the static handler sending a hit's bytes.
	wantTargets = append(wantTargets, hitInfo, hitStatic)
	if len(rep.Hit) != len(wantTargets) {
		t.Fatalf("hit groups = %d, want %d", len(rep.Hit), len(wantTargets))
	}
	for i, g := range rep.Hit {
		if g.Target != wantTargets[i] {
			t.Errorf("group %d target = %q, want %q", i, g.Target, wantTargets[i])
		}
		if g.Throughput.Median <= 0 || g.Errors != 0 || g.Unexpected != 0 {
			t.Errorf("%s: throughput %.0f, errors %d, not HIT %d; want > 0, 0, 0", g.Target, g.Throughput.Median, g.Errors, g.Unexpected)
		}
	}
	for _, c := range rep.Checks {
		if strings.HasPrefix(c.Name, "Hit path, memory") && c.Status == "N/A" {
			t.Errorf("check %q not measured", c.Name)
		}
	}
}

func TestSlug(t *testing.T) {
	for in, want := range map[string]string{
		"mock 0 ms, 32 conns":                         "mock-0-ms-32-conns",
		"stream:true, 20 chunks 10 ms apart, 4 conns": "stream-true-20-chunks-10-ms-apart-4-conns",
		"corral-memory-hit":                           "corral-memory-hit",
		"  Redis ×3 ":                                 "redis-3",
	} {
		if got := slug(in); got != want {
			t.Errorf("slug(%q) = %q, want %q", in, got, want)
		}
	}
}
