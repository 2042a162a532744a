package server

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/tenant"
)

func chatBody(text string) string {
	return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + text + `"}]}`
}

// burst fires n identical requests at once over the given gateways, round
// robin, and returns every answer.
func burst(bases []string, n int, key, body string, hdr ...string) []answer {
	out := make([]answer, n)
	atOnce(n, func(i int) { out[i] = send(context.Background(), bases[i%len(bases)], key, body, hdr...) })
	return out
}

// atOnce runs f(0) … f(n-1) in n goroutines released together, and waits
// for them all.
func atOnce(n int, f func(i int)) {
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			f(i)
		}()
	}
	close(start)
	wg.Wait()
}

// countCache tallies X-Corral-Cache values and checks every answer is a 200
// with the same body.
func countCache(t *testing.T, answers []answer) map[string]int {
	t.Helper()
	counts := map[string]int{}
	for i, a := range answers {
		if a.err != nil || a.status != 200 {
			t.Fatalf("answer %d: status %d err %v body %s", i, a.status, a.err, a.body)
		}
		if a.body != answers[0].body {
			t.Fatalf("answer %d differs:\n%s\nvs\n%s", i, a.body, answers[0].body)
		}
		counts[a.header.Get("X-Corral-Cache")]++
	}
	return counts
}

// wantOneLeader fails t unless a burst's answers, all alike, cost one
// upstream call and exactly one of them is the MISS that made it; leader
// says which request that should be.
func wantOneLeader(t *testing.T, h *harness, answers []answer, leader string) {
	t.Helper()
	counts := countCache(t, answers)
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1 (%s)", n, leader)
	}
	if counts[cacheMiss] != 1 {
		t.Errorf("X-Corral-Cache counts = %v; want exactly one MISS (%s)", counts, leader)
	}
}

func TestStampedeOneUpstreamCall(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, func(o *harnessOptions) { o.gate = gate })
	go func() {
		// Hold the upstream answer until the burst has piled up behind it.
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		close(gate)
	}()
	answers := burst([]string{h.gw.URL}, 200, acmeKey, chatBody("stampede"))
	counts := countCache(t, answers)
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
	if counts[cacheMiss] != 1 || counts[cacheMiss]+counts[cacheCoalesced]+counts[cacheHit] != 200 {
		t.Errorf("X-Corral-Cache counts = %v; want exactly one MISS, the rest COALESCED or HIT", counts)
	}
	if !strings.Contains(answers[0].body, "mock reply to: stampede") {
		t.Errorf("body = %s", answers[0].body)
	}
	for _, a := range answers {
		switch a.header.Get("X-Corral-Cache") {
		case cacheMiss:
			if cs := a.header.Get("Cache-Status"); cs != "corral; fwd=miss; stored" {
				t.Errorf("MISS Cache-Status = %q", cs)
			}
		case cacheCoalesced:
			if cs := a.header.Get("Cache-Status"); cs != "corral; fwd=miss; collapsed" {
				t.Errorf("COALESCED Cache-Status = %q", cs)
			}
		}
	}
	if g := h.srv.groupFor("acme"); g.Len() != 0 {
		t.Errorf("in-flight table holds %d flights after the burst; want 0", g.Len())
	}
}

// fakeClockStore is a memory store on a test clock, and the clock.
func fakeClockStore(t *testing.T) (clock func() time.Time, advance func(time.Duration), store *cache.Memory) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	clock = func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance = func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	store = cache.NewMemory(cache.MemoryOptions{Now: clock})
	t.Cleanup(func() { _ = store.Close() })
	return clock, advance, store
}

func TestHitHeaders(t *testing.T) {
	clock, advance, store := fakeClockStore(t)
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) { so.Cache, so.Now = store, clock }
	})
	ctx := context.Background()
	first := send(ctx, h.gw.URL, acmeKey, chatBody("hit me"))
	if first.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("first = %v", first.header)
	}
	advance(90 * time.Second)
	second := send(ctx, h.gw.URL, acmeKey, chatBody("hit me"))
	if got := second.header.Get("X-Corral-Cache"); got != cacheHit {
		t.Fatalf("second X-Corral-Cache = %q; want HIT", got)
	}
	if second.body != first.body || second.header.Get("Content-Type") != "application/json" {
		t.Errorf("hit body or type differs from the miss")
	}
	if got := second.header.Get("Age"); got != "90" {
		t.Errorf("Age = %q; want 90", got)
	}
	if got := second.header.Get("Cache-Status"); got != "corral; hit; ttl=3510" {
		t.Errorf("Cache-Status = %q; want corral; hit; ttl=3510", got)
	}
	// TTL expiry: an hour later the entry is gone and the upstream is asked again.
	advance(time.Hour)
	third := send(ctx, h.gw.URL, acmeKey, chatBody("hit me"))
	if got := third.header.Get("X-Corral-Cache"); got != cacheMiss {
		t.Errorf("after the TTL X-Corral-Cache = %q; want MISS", got)
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
}

func TestRequestControls(t *testing.T) {
	clock, advance, store := fakeClockStore(t)
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) { so.Cache, so.Now = store, clock }
		o.tenants = []tenant.Spec{{ID: "nocache", KeySHA256: []string{tenant.HashKey("sk-nocache")}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, Cache: false}}}
	})
	ctx := context.Background()
	calls := func() int64 { return h.mock.Stats().Requests }
	expect := func(name string, a answer, wantCache, wantStatus string, wantCalls int64) {
		t.Helper()
		if a.status != 200 || a.header.Get("X-Corral-Cache") != wantCache || a.header.Get("Cache-Status") != wantStatus || calls() != wantCalls {
			t.Errorf("%s: %d %s %q with %d upstream calls; want %s %q with %d",
				name, a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Cache-Status"), calls(), wantCache, wantStatus, wantCalls)
		}
	}

	expect("no-store", send(ctx, h.gw.URL, acmeKey, chatBody("c"), "Cache-Control", "no-store"), cacheBypass, "corral; fwd=bypass", 1)
	expect("after no-store", send(ctx, h.gw.URL, acmeKey, chatBody("c")), cacheMiss, "corral; fwd=miss; stored", 2)
	expect("plain hit", send(ctx, h.gw.URL, acmeKey, chatBody("c")), cacheHit, "corral; hit; ttl=3600", 2)
	expect("no-cache", send(ctx, h.gw.URL, acmeKey, chatBody("c"), "Cache-Control", "no-cache"), cacheMiss, "corral; fwd=request; stored", 3)
	advance(100 * time.Second)
	expect("max-age too young", send(ctx, h.gw.URL, acmeKey, chatBody("c"), "Cache-Control", "max-age=50"), cacheMiss, "corral; fwd=miss; stored", 4)
	advance(10 * time.Second)
	expect("max-age ok", send(ctx, h.gw.URL, acmeKey, chatBody("c"), "Cache-Control", "max-age=50"), cacheHit, "corral; hit; ttl=3590", 4)

	expect("custom ttl", send(ctx, h.gw.URL, acmeKey, chatBody("ttl"), "X-Corral-Cache-TTL", "30"), cacheMiss, "corral; fwd=miss; stored", 5)
	expect("custom ttl hit", send(ctx, h.gw.URL, acmeKey, chatBody("ttl")), cacheHit, "corral; hit; ttl=30", 5)
	advance(31 * time.Second)
	expect("custom ttl expired", send(ctx, h.gw.URL, acmeKey, chatBody("ttl")), cacheMiss, "corral; fwd=miss; stored", 6)

	expect("tenant without cache", send(ctx, h.gw.URL, "sk-nocache", chatBody("c")), cacheBypass, "corral; fwd=bypass", 7)
	expect("tenant without cache again", send(ctx, h.gw.URL, "sk-nocache", chatBody("c")), cacheBypass, "corral; fwd=bypass", 8)

	bad := send(ctx, h.gw.URL, acmeKey, chatBody("c"), "X-Corral-Cache-TTL", "soon")
	if bad.status != 400 || !strings.Contains(bad.body, "X-Corral-Cache-TTL") || calls() != 8 {
		t.Errorf("bad TTL header: %d %s", bad.status, bad.body)
	}
}

func TestTenantsNeverShareEntries(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{{ID: "beta", KeySHA256: []string{tenant.HashKey("sk-beta")}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, Cache: true}}}
	})
	ctx := context.Background()
	for _, key := range []string{acmeKey, "sk-beta", acmeKey, "sk-beta"} {
		if a := send(ctx, h.gw.URL, key, chatBody("same prompt")); a.status != 200 {
			t.Fatalf("status %d", a.status)
		}
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2 (one per tenant)", n)
	}
}

func TestFirstClientHangsUp(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, func(o *harnessOptions) { o.gate = gate })
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan answer, 1)
	go func() { first <- send(ctx, h.gw.URL, acmeKey, chatBody("hang up")) }()
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	follower := make(chan answer, 1)
	go func() { follower <- send(context.Background(), h.gw.URL, acmeKey, chatBody("hang up")) }()
	// The follower has joined once the flight counts it.
	waitFor(t, func() bool { return h.srv.groupFor("acme").Stats().Joined == 1 })
	cancel()
	if a := <-first; !errors.Is(a.err, context.Canceled) {
		t.Fatalf("first client: %v", a.err)
	}
	close(gate)
	a := <-follower
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheCoalesced || !strings.Contains(a.body, "mock reply to: hang up") {
		t.Fatalf("follower got %d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
	}
	if hit := send(context.Background(), h.gw.URL, acmeKey, chatBody("hang up")); hit.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("after the flight: %s; want HIT (the answer was stored)", hit.header.Get("X-Corral-Cache"))
	}
	if n := h.mock.Stats(); n.Requests != 1 || n.Cancelled != 0 {
		t.Errorf("upstream stats %+v; want one call, not cancelled", n)
	}
}

// waitFor polls cond; it stands in only where no event exists to wait on
// (an internal counter of the server), bounded by a deadline.
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached within 5s")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestLeaderSemaphore(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, func(o *harnessOptions) {
		o.gate = gate
		o.tenants = []tenant.Spec{{ID: "solo", KeySHA256: []string{tenant.HashKey("sk-solo")}, Policy: tenant.Policy{MaxLeaders: 1, CacheTTL: time.Hour, Cache: true}}}
		o.server = func(so *Options) { so.LeaderWait = 50 * time.Millisecond }
	})
	first := make(chan answer, 1)
	go func() { first <- send(context.Background(), h.gw.URL, "sk-solo", chatBody("one")) }()
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	// A different prompt needs a second upstream call; the tenant's one
	// permit is taken, so after the bounded wait it is refused.
	second := send(context.Background(), h.gw.URL, "sk-solo", chatBody("two"))
	if second.status != 429 || !strings.Contains(second.body, `"code":"tenant_concurrency_exceeded"`) ||
		second.header.Get("Retry-After") == "" || second.header.Get("Retry-After-Ms") == "" {
		t.Errorf("second = %d %s %v; want 429 tenant_concurrency_exceeded with Retry-After", second.status, second.body, second.header)
	}
	// A refusal is not an answer: no cache status, and not counted as a
	// miss (the dashboard would show rejections as savings).
	if v := second.header.Get("X-Corral-Cache"); v != "" || second.header.Get("Cache-Status") != "" {
		t.Errorf("refusal carries X-Corral-Cache %q, Cache-Status %q; want none", v, second.header.Get("Cache-Status"))
	}
	m := h.srv.metrics
	if got := testutil.ToFloat64(m.RequestsCounter("solo", "/chat/completions", cacheMiss, 429)); got != 0 {
		t.Errorf("the refusal counted as %v MISS; want 0", got)
	}
	if got := testutil.ToFloat64(m.RequestsCounter("solo", "/chat/completions", "NONE", 429)); got != 1 {
		t.Errorf("refusals counted without a cache outcome = %v; want 1", got)
	}
	close(gate)
	if a := <-first; a.status != 200 {
		t.Errorf("first = %d", a.status)
	}
	// The permit is back: the refused prompt now goes through.
	if a := send(context.Background(), h.gw.URL, "sk-solo", chatBody("two")); a.status != 200 {
		t.Errorf("after the permit was released: %d %s", a.status, a.body)
	}
}
