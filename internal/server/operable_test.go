package server

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/usage"
)

const adminToken = "admin-secret-token"

var withAdmin = withServer(func(so *Options) { so.AdminToken = adminToken })

// adminDo calls an admin endpoint with the given bearer token.
func adminDo(t *testing.T, base, method, path, token string) (int, string) {
	t.Helper()
	return objectstest.Do(t, objectstest.NewRequest(t, method, base+path, token, ""))
}

func TestMetricsAfterAMix(t *testing.T) {
	gate := make(chan struct{})
	var once sync.Once
	h := newHarness(t, withAdmin, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("rl", "sk-rl", 1, 0)}
		o.gate = gate
	})
	close(gate) // only the coalescing step below holds the upstream
	ctx := context.Background()
	send(ctx, h.gw.URL, acmeKey, chatBody("mix"))                                  // MISS
	send(ctx, h.gw.URL, acmeKey, chatBody("mix"))                                  // HIT
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-404","messages":[]}`)             // MISS, 404
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-404","messages":[]}`)             // NEGATIVE
	send(ctx, h.gw.URL, "sk-rl", chatBody("limited"))                              // 200
	if a := send(ctx, h.gw.URL, "sk-rl", chatBody("limited 2")); a.status != 429 { // refused
		t.Fatalf("want a 429, got %d", a.status)
	}
	// Two concurrent identical requests: one MISS, one COALESCED.
	hold := make(chan struct{})
	h2 := newHarness(t, withAdmin, func(o *harnessOptions) { o.gate = hold })
	go func() {
		_, _ = h2.mock.Wait(ctx, func(s mockllm.Stats) bool { return s.InFlight == 1 })
		waitFor(t, func() bool { return h2.srv.groupFor("acme").Stats().Joined == 1 })
		once.Do(func() { close(hold) })
	}()
	burst([]string{h2.gw.URL}, 2, acmeKey, chatBody("together"))

	m := h.srv.metrics
	checks := []struct {
		name string
		got  float64
		want float64
	}{
		{"MISS 200", testutil.ToFloat64(m.RequestsCounter("acme", "/chat/completions", cacheMiss, 200)), 1},
		{"HIT 200", testutil.ToFloat64(m.RequestsCounter("acme", "/chat/completions", cacheHit, 200)), 1},
		{"MISS 404", testutil.ToFloat64(m.RequestsCounter("acme", "/chat/completions", cacheMiss, 404)), 1},
		{"NEGATIVE 404", testutil.ToFloat64(m.RequestsCounter("acme", "/chat/completions", cacheNegative, 404)), 1},
		{"429 requests", testutil.ToFloat64(m.RateLimitedCounter("rl", "requests")), 1},
		{"upstream answer", testutil.ToFloat64(m.UpstreamCounter("acme", "gpt-4o-mini", "answer")), 1},
		{"upstream deterministic", testutil.ToFloat64(m.UpstreamCounter("acme", "mock-404", "deterministic")), 1},
		{"tokens saved by the hit", testutil.ToFloat64(m.TokensSavedCounter("acme", "hit")), 5}, // 1 prompt + 4 completion words
		{"COALESCED 200 (second gateway)", testutil.ToFloat64(h2.srv.metrics.RequestsCounter("acme", "/chat/completions", cacheCoalesced, 200)), 1},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v; want %v", c.name, c.got, c.want)
		}
	}
	// The exposition itself, through the admin-guarded /metrics.
	if code, _ := adminDo(t, h.gw.URL, "GET", "/metrics", ""); code != 401 {
		t.Errorf("/metrics without the admin token = %d; want 401", code)
	}
	code, body := adminDo(t, h.gw.URL, "GET", "/metrics", adminToken)
	for _, want := range []string{
		`corral_requests_total{cache="HIT",code="200",endpoint="/chat/completions",tenant="acme"} 1`,
		`corral_ratelimit_rejections_total{kind="requests",tenant="rl"} 1`,
		`corral_upstream_duration_seconds_bucket`,
		`corral_inflight_requests`,
		`go_goroutines`,
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	for _, secret := range []string{acmeKey, "sk-rl", upstreamKey, "mock reply to"} {
		if strings.Contains(body, secret) {
			t.Errorf("/metrics contains %q", secret)
		}
	}
}

func TestAdminAuth(t *testing.T) {
	off := newHarness(t)
	if code, _ := adminDo(t, off.gw.URL, "POST", "/admin/reload", adminToken); code != 404 {
		t.Errorf("admin without CORRAL_ADMIN_TOKEN = %d; want 404", code)
	}
	h := newHarness(t, withAdmin)
	tests := []struct {
		token string
		want  int
	}{
		{"", 401},
		{"wrong", 401},
		{adminToken + "x", 401},
		{acmeKey, 401}, // a tenant key is not an admin token
		{adminToken, 200},
	}
	for _, tt := range tests {
		if code, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/acme/usage", tt.token); code != tt.want {
			t.Errorf("token %q: %d %s; want %d", tt.token, code, body, tt.want)
		}
	}
	if code, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/nobody/usage", adminToken); code != 404 || !strings.Contains(body, `"param":"tenant"`) {
		t.Errorf("unknown tenant = %d %s; want 404 naming the tenant param", code, body)
	}
}

func TestPurge(t *testing.T) {
	modes := map[string]func(*testing.T) *harness{
		"memory": func(t *testing.T) *harness { return newHarness(t, withAdmin) },
		"redis": func(t *testing.T) *harness {
			h, _ := distributed(t, 2, withAdmin)
			return h
		},
	}
	for name, mk := range modes {
		t.Run(name, func(t *testing.T) {
			h := mk(t)
			ctx := context.Background()
			other := h.gws[len(h.gws)-1].URL
			send(ctx, h.gw.URL, acmeKey, chatBody("purge me"))
			send(ctx, h.gw.URL, acmeKey, `{"model":"mock-404","messages":[]}`)
			send(ctx, h.gw.URL, limitedKey, chatBody("keep me"))
			if a := send(ctx, other, acmeKey, chatBody("purge me")); a.header.Get("X-Corral-Cache") != cacheHit {
				t.Fatalf("before the purge: %s", a.header.Get("X-Corral-Cache"))
			}
			code, body := adminDo(t, other, "DELETE", "/admin/cache/acme", adminToken)
			if code != 200 || !strings.Contains(body, `"deleted":2`) {
				t.Errorf("purge = %d %s; want 200 with 2 deleted (one positive, one negative)", code, body)
			}
			if a := send(ctx, h.gw.URL, acmeKey, chatBody("purge me")); a.header.Get("X-Corral-Cache") != cacheMiss {
				t.Errorf("after the purge: %s; want MISS", a.header.Get("X-Corral-Cache"))
			}
			if a := send(ctx, h.gw.URL, acmeKey, `{"model":"mock-404","messages":[]}`); a.header.Get("X-Corral-Cache") != cacheMiss {
				t.Errorf("negative after the purge: %s; want MISS", a.header.Get("X-Corral-Cache"))
			}
			if a := send(ctx, h.gw.URL, limitedKey, chatBody("keep me")); a.header.Get("X-Corral-Cache") != cacheHit {
				t.Errorf("another tenant after the purge: %s; want its HIT kept", a.header.Get("X-Corral-Cache"))
			}
			// One key.
			hash := promptHash(t, "acme", chatBody("purge me"))
			if code, body := adminDo(t, h.gw.URL, "DELETE", "/admin/cache/acme/"+hash, adminToken); code != 200 || !strings.Contains(body, `"deleted":1`) {
				t.Errorf("purge one key = %d %s", code, body)
			}
			if a := send(ctx, other, acmeKey, chatBody("purge me")); a.header.Get("X-Corral-Cache") != cacheMiss {
				t.Errorf("after purging the key: %s; want MISS", a.header.Get("X-Corral-Cache"))
			}
			if code, _ := adminDo(t, h.gw.URL, "DELETE", "/admin/cache/acme/not-a-hash", adminToken); code != 400 {
				t.Errorf("bad key = %d; want 400", code)
			}
		})
	}
}

func TestReloadTenants(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.yaml")
	write := func(content string) {
		if err := os.WriteFile(file, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tenantsYAML := func(keys ...string) string {
		var b strings.Builder
		b.WriteString("tenants:\n")
		for i, k := range keys {
			b.WriteString("  - id: t" + string(rune('a'+i)) + "\n    keys: [{sha256: \"" + tenant.HashKey(k) + "\"}]\n")
		}
		return b.String()
	}
	load := func() (*tenant.Registry, error) {
		tf, err := config.LoadTenants(file)
		if err != nil {
			return nil, err
		}
		var specs []tenant.Spec
		for _, s := range tf.Tenants {
			sp := tenant.Spec{ID: s.ID, Policy: tenant.Policy{MaxLeaders: s.Leaders(), CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: s.Caches()}}
			for _, k := range s.Keys {
				sp.KeySHA256 = append(sp.KeySHA256, k.SHA256)
			}
			specs = append(specs, sp)
		}
		return tenant.NewRegistry(specs)
	}
	write(tenantsYAML("sk-one"))
	reg, err := load()
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, withAdmin, func(o *harnessOptions) {
		o.server = func(so *Options) { so.Tenants, so.Reload, so.AdminToken = reg, load, adminToken }
	})
	ctx := context.Background()
	if a := send(ctx, h.gw.URL, "sk-one", chatBody("x")); a.status != 200 {
		t.Fatalf("before reload: %d", a.status)
	}
	if a := send(ctx, h.gw.URL, "sk-two", chatBody("x")); a.status != 401 {
		t.Fatalf("unknown key before reload: %d", a.status)
	}
	// Add a tenant and drop the first tenant's key.
	write(tenantsYAML("sk-gone-now", "sk-two"))
	if code, body := adminDo(t, h.gw.URL, "POST", "/admin/reload", adminToken); code != 200 || !strings.Contains(body, `"tenants":2`) {
		t.Fatalf("reload = %d %s", code, body)
	}
	if a := send(ctx, h.gw.URL, "sk-two", chatBody("x")); a.status != 200 {
		t.Errorf("new tenant after reload: %d", a.status)
	}
	if a := send(ctx, h.gw.URL, "sk-one", chatBody("x")); a.status != 401 {
		t.Errorf("removed key after reload: %d; want 401", a.status)
	}
	// A broken file is refused and the running tenants keep serving.
	write("tenants:\n  - id: Bad Id\n    keys: [{sha256: \"" + tenant.HashKey("sk-three") + "\"}]\n")
	code, body := adminDo(t, h.gw.URL, "POST", "/admin/reload", adminToken)
	if code != 400 || !strings.Contains(body, "tenants.yaml:2") {
		t.Errorf("broken reload = %d %s; want 400 naming file and line", code, body)
	}
	if a := send(ctx, h.gw.URL, "sk-two", chatBody("x")); a.status != 200 {
		t.Errorf("after a refused reload: %d; want the old tenants serving", a.status)
	}
}

func TestUsageAddsUpAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 2, withAdmin)
	ctx := context.Background()
	send(ctx, h.gws[0].URL, acmeKey, chatBody("u"))                              // MISS: one upstream call
	send(ctx, h.gws[1].URL, acmeKey, chatBody("u"))                              // HIT
	send(ctx, h.gws[1].URL, acmeKey, chatBody("u"), "Cache-Control", "no-store") // BYPASS: one upstream call
	for _, s := range h.srvs {
		if err := s.usage.(*usage.Redis).Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	code, body := adminDo(t, h.gws[0].URL, "GET", "/admin/tenants/acme/usage", adminToken)
	var got struct {
		Tenant                 string
		Requests, Hits, Bypass int64
		UpstreamCalls          int64 `json:"upstream_calls"`
		Tokens                 int64
		TokensSaved            int64 `json:"tokens_saved"`
	}
	if err := json.Unmarshal([]byte(body), &got); code != 200 || err != nil {
		t.Fatalf("usage = %d %s", code, body)
	}
	if got.Tenant != "acme" || got.Requests != 3 || got.Hits != 1 || got.Bypass != 1 || got.UpstreamCalls != 2 || got.Tokens != 10 || got.TokensSaved != 5 {
		t.Errorf("usage = %+v; want 3 requests, 1 hit, 1 bypass, 2 upstream calls, 10 tokens used (the MISS's and the BYPASS's) and 5 saved", got)
	}
}

func TestLogsNeverCarrySecretsOrPrompts(t *testing.T) {
	var logs logtest.Buffer
	h := newHarness(t, withAdmin, func(o *harnessOptions) { o.logs = &logs })
	ctx := context.Background()
	prompt := "my very private prompt text"
	send(ctx, h.gw.URL, acmeKey, chatBody(prompt))
	send(ctx, h.gw.URL, acmeKey, chatBody(prompt))
	send(ctx, h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"`+prompt+` streamed"}]}`)
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-401","messages":[{"role":"user","content":"`+prompt+`"}]}`)
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-cut","stream":true,"messages":[{"role":"user","content":"`+prompt+`"}]}`)
	send(ctx, h.gw.URL, "sk-wrong-tenant-key-123", chatBody(prompt))
	send(ctx, h.gw.URL, acmeKey, `{"model": broken `+prompt)
	adminDo(t, h.gw.URL, "GET", "/metrics", adminToken)
	adminDo(t, h.gw.URL, "GET", "/metrics", "wrong-admin-token")
	out := logs.String()
	if !strings.Contains(out, `"msg":"request"`) || !strings.Contains(out, `"tenant":"acme"`) {
		t.Fatalf("no access log lines captured:\n%s", out)
	}
	for _, secret := range []string{acmeKey, upstreamKey, "sk-wrong-tenant-key-123", adminToken, "wrong-admin-token", prompt, "mock reply to"} {
		if strings.Contains(out, secret) {
			t.Errorf("logs contain %q", secret)
		}
	}
	for _, want := range []string{`"request_id":`, `"endpoint":"/chat/completions"`, `"model":"gpt-4o-mini"`, `"cache":"HIT"`, `"latency_ms":`, `"upstream_ms":`, `"prompt_tokens":`, `"saved_tokens":`} {
		if !strings.Contains(out, want) {
			t.Errorf("access log lacks %s", want)
		}
	}
}
