package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/tenant"
)

// testWhileRevalidate: 30 concurrent requests on an entry 30s past its
// TTL, over every instance, are all answered STALE with the old content
// while the upstream is held (none waits for it), and exactly one refresh
// call is made; once it is released, every instance answers HIT with the
// new content.
func testWhileRevalidate(t *testing.T, h *harness, clock *testClock, ctl *upstreamControl) {
	ctx := context.Background()
	body := chatBody("hot prompt")
	first := send(ctx, h.gws[0].URL, staleKey, body)
	if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("first: %d %s", first.status, first.header.Get("X-Corral-Cache"))
	}
	clock.Advance(time.Hour + 30*time.Second)
	ctl.set("new")
	release := make(chan struct{})
	ctl.hold.Store(&release)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	done := make(chan []answer, 1)
	go func() { done <- burst(h.bases(), 30, staleKey, body) }()
	var answers []answer
	select {
	case answers = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("stale requests waited for the held upstream")
	}
	for i, a := range answers {
		if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
			t.Fatalf("answer %d: %d %s %q; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
		if cs := a.header.Get("Cache-Status"); cs != "corral; hit; fwd=stale; ttl=-30" {
			t.Errorf("answer %d Cache-Status = %q; want corral; hit; fwd=stale; ttl=-30", i, cs)
		}
		if age := a.header.Get("Age"); age != "3630" {
			t.Errorf("answer %d Age = %q; want 3630", i, age)
		}
	}
	close(release)
	released = true
	waitFlights(t, h)
	if n := ctl.calls.Load(); n != 2 {
		t.Errorf("upstream calls = %d; want 2 (the miss and exactly one refresh)", n)
	}
	if n := refreshes(h, "stale"); n != 1 {
		t.Errorf("refreshes counted = %v; want 1", n)
	}
	var saved float64
	for _, srv := range h.srvs {
		saved += testutil.ToFloat64(srv.metrics.TokensSavedCounter("stale", "stale"))
	}
	if want := float64(30 * (first.prompt() + first.completion())); saved != want || want == 0 {
		t.Errorf("tokens saved via stale = %v; want %v (30 answers)", saved, want)
	}
	for _, base := range h.bases() {
		a := send(ctx, base, staleKey, body)
		if a.header.Get("X-Corral-Cache") != cacheHit || !strings.Contains(a.body, refreshedContent) {
			t.Errorf("%s after the refresh: %s %q; want HIT with the new content", base, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := ctl.calls.Load(); n != 2 {
		t.Errorf("upstream calls after the hits = %d; want 2", n)
	}
}

func TestStaleWhileRevalidate(t *testing.T) { inBothModes(t, staleTenant, testWhileRevalidate) }

// TestStaleRefreshFailsTransiently: a refresh that gets a 500, a 429 or a
// dropped connection leaves the old entry serving STALE within the window,
// and no second refresh starts within the backoff; past both windows the
// request goes upstream and gets the failure.
func TestStaleRefreshFailsTransiently(t *testing.T) {
	h, clock, ctl := staleHarness(t, 3, true)
	ctx := context.Background()
	eachTransientFailure(t, ctl, func(t *testing.T, mode string) {
		body := chatBody("refresh fails with " + mode)
		first := send(ctx, h.gws[0].URL, staleKey, body)
		if first.status != 200 {
			t.Fatalf("first: %d", first.status)
		}
		clock.Advance(time.Hour + time.Minute)
		ctl.set(mode)
		before := ctl.calls.Load()
		for i, base := range h.bases() {
			a := send(ctx, base, staleKey, body)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
				t.Fatalf("request %d: %d %s; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"))
			}
			waitFlights(t, h)
		}
		if n := ctl.calls.Load() - before; n < 1 || n > 2 {
			// One refresh; the upstream client may retry a dropped
			// connection once.
			t.Errorf("upstream calls during the window = %d; want one refresh", n)
		}
		if a := send(ctx, h.gws[1].URL, staleKey, body); a.header.Get("X-Corral-Cache") != cacheStale {
			t.Errorf("after the failed refresh: %s; want STALE", a.header.Get("X-Corral-Cache"))
		}
		// Past both windows (10m and 5m): the failure itself.
		clock.Advance(10 * time.Minute)
		a := send(ctx, h.gws[2].URL, staleKey, body)
		if a.status == 200 || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("past the windows: %d %s; want the upstream failure", a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	})
}

// TestStaleRefreshDeterministicFailure: a refresh answered 404 replaces
// the entry with the negative answer: the old entry stops serving.
func TestStaleRefreshDeterministicFailure(t *testing.T) {
	h, clock, ctl := staleHarness(t, 3, true)
	ctx := context.Background()
	body := chatBody("a retired model")
	prime(t, h.gws[0].URL, staleKey, body)
	clock.Advance(time.Hour + time.Minute)
	ctl.set("404")
	if a := send(ctx, h.gws[1].URL, staleKey, body); a.header.Get("X-Corral-Cache") != cacheStale {
		t.Fatalf("in the window: %s; want STALE", a.header.Get("X-Corral-Cache"))
	}
	waitFlights(t, h)
	for _, base := range h.bases() {
		a := send(ctx, base, staleKey, body)
		if a.status != http.StatusNotFound || a.header.Get("X-Corral-Cache") != cacheNegative {
			t.Errorf("%s after the 404 refresh: %d %s; want the 404 as NEGATIVE", base, a.status, a.header.Get("X-Corral-Cache"))
		}
	}
	// Once the negative entry has expired too, the old answer does not
	// come back.
	clock.Advance(time.Minute)
	ctl.set("")
	if a := send(ctx, h.gws[0].URL, staleKey, body); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("after the negative TTL: %d %s; want a MISS", a.status, a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleControls: no-cache, max-age=N and no-store never get a stale
// entry, nor does a tenant without the window.
func TestStaleControls(t *testing.T) {
	h, clock, _ := staleHarness(t, 3, true)
	ctx := context.Background()
	body := chatBody("controls")
	prime(t, h.gws[0].URL, staleKey, body)
	plain := chatBody("no window")
	send(ctx, h.gws[0].URL, acmeKey, plain)
	clock.Advance(time.Hour + time.Minute)
	for _, cc := range []string{"no-cache", "max-age=7200", "no-store"} {
		a := send(ctx, h.gws[1].URL, staleKey, body, "Cache-Control", cc)
		if a.status != 200 || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("Cache-Control: %s: %d %s; want no STALE", cc, a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	}
	if a := send(ctx, h.gws[2].URL, acmeKey, plain); a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("tenant without windows past the TTL: %s; want MISS", a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleStreamReplayed: a streaming request gets the stale entry
// replayed as an event stream.
func TestStaleStreamReplayed(t *testing.T) {
	h, clock, _ := staleHarness(t, 3, true)
	ctx := context.Background()
	prime(t, h.gws[0].URL, staleKey, chatBody("streamed stale"))
	clock.Advance(time.Hour + time.Second)
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"streamed stale"}]}`
	a := send(ctx, h.gws[1].URL, staleKey, stream)
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") || !strings.Contains(a.body, "data: [DONE]") {
		t.Errorf("stream: %d %s %s %q; want a STALE event stream", a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Content-Type"), a.body)
	}
	waitFlights(t, h)
}

const ifErrorKey = "sk-iferror-test-key"

// ifErrorTenant: stale_while_revalidate 1m, stale_if_error 1h past a 1h
// TTL.
var ifErrorTenant = tenant.Spec{ID: "iferror", KeySHA256: []string{tenant.HashKey(ifErrorKey)}, Policy: tenant.Policy{MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true,
	StaleWhileRevalidate: time.Minute, StaleIfError: time.Hour}}
