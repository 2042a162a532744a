package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
)

// tenantKeys lists the Redis keys of one tenant (SCAN, never KEYS).
func tenantKeys(t *testing.T, rs *redistest.Server, tenantID string) []string {
	t.Helper()
	var out []string
	iter := rs.Client().Scan(context.Background(), 0, keying.TenantPattern(tenantID), 100).Iterator()
	for iter.Next(context.Background()) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// storedKeys lists a tenant's response and negative entries (not its
// locks or live streams, which expire on their own).
func storedKeys(t *testing.T, rs *redistest.Server, tenantID string) []string {
	t.Helper()
	var out []string
	for _, k := range tenantKeys(t, rs, tenantID) {
		if strings.HasSuffix(k, ":r") || strings.HasSuffix(k, ":n") {
			out = append(out, k)
		}
	}
	return out
}

func TestNegativeCacheAcrossInstances(t *testing.T) {
	gate := make(chan struct{})
	h, rs := distributed(t, 2, func(o *harnessOptions) { o.gate = gate; o.negativeTTL = 400 * time.Millisecond })
	go func() {
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		close(gate)
	}()
	body := `{"model":"mock-404","messages":[{"role":"user","content":"unknown model"}]}`
	answers := burst(h.bases(), 50, acmeKey, body)
	for i, a := range answers {
		if a.status != 404 || a.body != answers[0].body || !strings.Contains(a.body, `"code":"model_not_found"`) {
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Fatalf("upstream calls = %d; want 1", n)
	}
	negName := keying.Name("acme", promptHash(t, "acme", body), keying.Negative)
	if n, _ := rs.Client().Exists(context.Background(), negName).Result(); n != 1 {
		t.Fatal("no negative entry in Redis")
	}
	for i := range 10 {
		a := send(context.Background(), h.bases()[i%2], acmeKey, body)
		if a.status != 404 || a.header.Get("X-Corral-Cache") != cacheNegative || a.body != answers[0].body ||
			a.header.Get("Age") == "" || !strings.HasPrefix(a.header.Get("Cache-Status"), "corral; hit; ttl=") {
			t.Errorf("within the TTL: %d %v %s", a.status, a.header, a.body)
		}
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls within the negative TTL = %d; want still 1", n)
	}
	// Wait for Redis to expire the entry (an observable event), then the
	// next request pays for one new call.
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, _ := rs.Client().Exists(context.Background(), negName).Result()
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("negative entry never expired")
		}
		time.Sleep(10 * time.Millisecond) // Redis expiry has no event to wait on
	}
	if a := send(context.Background(), h.gw.URL, acmeKey, body); a.status != 404 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("after the TTL: %d %s", a.status, a.header.Get("X-Corral-Cache"))
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls after the TTL = %d; want 2", n)
	}
}

func TestTransientFailuresAreNeverStored(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.upstreamTimeout = 200 * time.Millisecond
		o.mock.SlowLatency = 10 * time.Second
	})
	tests := []struct {
		model      string
		wantStatus int
	}{
		{"mock-500", 500},
		{"mock-429", 429},
		{"mock-503", 503},
		{"mock-408", 408},
		{"mock-slow", 504}, // an upstream timeout
		{"mock-401", 502},
	}
	for _, tt := range tests {
		before := h.mock.Stats().Requests
		body := `{"model":"` + tt.model + `","messages":[{"role":"user","content":"transient"}]}`
		for i := range 5 {
			a := send(context.Background(), h.gw.URL, acmeKey, body)
			if a.status != tt.wantStatus || a.header.Get("X-Corral-Cache") != cacheMiss {
				t.Errorf("%s request %d: %d %s; want %d MISS", tt.model, i, a.status, a.header.Get("X-Corral-Cache"), tt.wantStatus)
			}
		}
		if got := h.mock.Stats().Requests - before; got != 5 {
			t.Errorf("%s: %d of 5 requests reached the upstream; want all 5", tt.model, got)
		}
	}
	if keys := storedKeys(t, rs, "acme"); len(keys) != 0 {
		t.Errorf("Redis holds entries %v after transient failures; want none", keys)
	}
}

func TestStreamCutNotStoredInRedis(t *testing.T) {
	h, rs := distributed(t, 2, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	body := `{"model":"gpt-4o-mini","stream":true,"mock":{"cut_after":3},"messages":[{"role":"user","content":"cut"}]}`
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if !strings.Contains(a.body, `"code":"upstream_error"`) || strings.Contains(a.body, "[DONE]") {
		t.Fatalf("cut stream = %q", a.body)
	}
	if keys := storedKeys(t, rs, "acme"); len(keys) != 0 {
		t.Errorf("Redis holds entries %v after a cut stream; want none", keys)
	}
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	waitFor(t, func() bool { return rs.Client().Exists(context.Background(), lock).Val() == 0 })
	if b := send(context.Background(), h.gws[1].URL, acmeKey, body); b.header.Get("X-Corral-Cache") != cacheMiss || h.mock.Stats().Requests != 2 {
		t.Errorf("next request: %s with %d upstream calls; want MISS and 2", b.header.Get("X-Corral-Cache"), h.mock.Stats().Requests)
	}
}

func TestPositiveWinsAndNoCacheSkipsBoth(t *testing.T) {
	h, rs := distributed(t, 1)
	ctx := context.Background()
	// The body steers the mock to fail deterministically first.
	failing := `{"model":"gpt-4o-mini","mock":{"status":400},"messages":[{"role":"user","content":"p"}]}`
	if a := send(ctx, h.gw.URL, acmeKey, failing); a.status != 400 {
		t.Fatalf("status %d", a.status)
	}
	hash := promptHash(t, "acme", failing)
	if n, _ := rs.Client().Exists(ctx, keying.Name("acme", hash, keying.Negative)).Result(); n != 1 {
		t.Fatal("400 not stored negatively")
	}
	if a := send(ctx, h.gw.URL, acmeKey, failing); a.header.Get("X-Corral-Cache") != cacheNegative {
		t.Fatalf("second = %s; want NEGATIVE", a.header.Get("X-Corral-Cache"))
	}
	// no-cache skips the negative entry and asks the upstream again.
	if a := send(ctx, h.gw.URL, acmeKey, failing, "Cache-Control", "no-cache"); a.header.Get("X-Corral-Cache") != cacheMiss || h.mock.Stats().Requests != 2 {
		t.Errorf("no-cache: %s with %d calls; want MISS and 2", a.header.Get("X-Corral-Cache"), h.mock.Stats().Requests)
	}
	// A positive entry for the same key wins over the negative one.
	// (Its answer is copied under the failing prompt's response key.)
	ok := send(ctx, h.gw.URL, acmeKey, chatBody("p"))
	if ok.status != 200 {
		t.Fatal(ok.status)
	}
	if err := rs.Client().Copy(ctx, keying.Name("acme", promptHash(t, "acme", chatBody("p")), keying.Response),
		keying.Name("acme", hash, keying.Response), 0, true).Err(); err != nil {
		t.Fatal(err)
	}
	if a := send(ctx, h.gw.URL, acmeKey, failing); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("with both entries: %d %s; want the positive HIT", a.status, a.header.Get("X-Corral-Cache"))
	}
}

func TestStreamingDeterministicFailure(t *testing.T) {
	h, _ := distributed(t, 1)
	body := `{"model":"mock-404","stream":true,"messages":[{"role":"user","content":"s"}]}`
	for i, want := range []string{cacheMiss, cacheNegative} {
		a := send(context.Background(), h.gw.URL, acmeKey, body)
		if a.status != 404 || a.header.Get("X-Corral-Cache") != want || !strings.HasPrefix(a.header.Get("Content-Type"), "application/json") ||
			!strings.Contains(a.body, `"code":"model_not_found"`) {
			t.Errorf("request %d: %d %s %q %s; want a plain 404 JSON error, %s", i, a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Content-Type"), a.body, want)
		}
	}
}

func TestOwnValidationErrorsLeaveNothing(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) { o.maxBody = 512 })
	for _, body := range []string{`{"model":`, `{"messages":[]}`, `{"model":"gpt-4o-mini","x":"` + strings.Repeat("y", 1024) + `"}`} {
		if a := send(context.Background(), h.gw.URL, acmeKey, body); a.status != 400 && a.status != 413 {
			t.Errorf("%q: %d", body[:min(len(body), 20)], a.status)
		}
	}
	if keys := tenantKeys(t, rs, "acme"); len(keys) != 0 || h.mock.Stats().Requests != 0 {
		t.Errorf("after rejected requests Redis holds %v and upstream saw %d; want nothing", keys, h.mock.Stats().Requests)
	}
}

// TestUnknownURL404IsNotRemembered: a 404 that is the URL's fault (a base
// URL without /v1) is passed through and never stored negatively, so
// fixing the configuration takes effect at once; a 404 model_not_found
// still is (TestNegativeCacheAcrossInstances).
func TestUnknownURL404IsNotRemembered(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				r.URL.Path = strings.TrimPrefix(r.URL.Path, "/v1") // as if CORRAL_UPSTREAM_URL lacked it
				next.ServeHTTP(w, r)
			})
		}
	})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"wrong url"}]}`
	for i := range 3 {
		a := send(context.Background(), h.gw.URL, acmeKey, body)
		if a.status != 404 || !strings.Contains(a.body, "unknown_url") || a.header.Get("X-Corral-Cache") != cacheMiss {
			t.Errorf("request %d: %d %s %s; want the upstream's 404 passed through as a MISS", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := h.mock.Stats().Requests; n != 3 {
		t.Errorf("upstream calls = %d; want 3 (nothing remembered)", n)
	}
}
