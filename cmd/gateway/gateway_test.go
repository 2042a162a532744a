package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestDistributedWiring runs the wired gateway against a real Redis and
// the mock model: a request is stored in Redis, /readyz reports the mode
// and Redis state, and a Redis outage degrades without failing requests.
func TestDistributedWiring(t *testing.T) {
	rs := redistest.Start(t)
	mock := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-wired")))
	gw := mustGateway(t,
		"CORRAL_REDIS_URL="+rs.URL(),
		"CORRAL_UPSTREAM_URL="+mock.URL+"/v1",
		"CORRAL_TENANTS_FILE="+file,
		"CORRAL_ADMIN_TOKEN=adm")
	srv := serveGateway(t, gw)

	chat := func(text string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Authorization", "Bearer sk-wired")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Corral-Cache")
	}
	ready := func() map[string]any {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		if resp.StatusCode != 200 {
			t.Errorf("/readyz = %d", resp.StatusCode)
		}
		return v
	}

	if code, cache := chat("wired"); code != 200 || cache != "MISS" {
		t.Fatalf("first = %d %s", code, cache)
	}
	if code, cache := chat("wired"); code != 200 || cache != "HIT" {
		t.Fatalf("second = %d %s", code, cache)
	}
	if n := len(rs.Client().Keys(context.Background(), "corral:v1:{acme:*").Val()); n != 1 {
		t.Errorf("Redis holds %d entries; want 1", n)
	}
	if v := ready(); v["mode"] != "distributed" || v["redis"] != "ok" {
		t.Errorf("/readyz = %v; want distributed, redis ok", v)
	}
	if !rs.Stoppable() {
		return
	}
	rs.Stop()
	for i := range 4 { // enough failures to trip the breaker
		if code, _ := chat("during outage " + string(rune('a'+i))); code != 200 {
			t.Errorf("during the outage: %d", code)
		}
	}
	if v := ready(); v["redis"] != "unreachable" {
		t.Errorf("/readyz during the outage = %v; want redis unreachable", v)
	}

	// An idle instance (no request touches Redis from here on) sees Redis
	// back through the breaker's background probe, within its interval
	// (1s), in /readyz and in corral_redis_up.
	redisUp := func() string {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "corral_redis_up "); ok {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	if up := redisUp(); up != "0" {
		t.Errorf("corral_redis_up during the outage = %q; want 0", up)
	}
	rs.Restart()
	back := time.Now()
	for ready()["redis"] != "ok" || redisUp() != "1" {
		if time.Since(back) > 5*time.Second {
			t.Fatalf("an idle instance did not see Redis back within 5s: /readyz %v, corral_redis_up %s", ready(), redisUp())
		}
		time.Sleep(20 * time.Millisecond) // polling what an operator's probe would see
	}
	if d := time.Since(back); d > 3*time.Second {
		t.Errorf("Redis reported back after %v; want within the probe interval (1s) and a reconnect", d)
	}
}

func TestEmbeddedReadyz(t *testing.T) {
	gw := mustGateway(t, "CORRAL_DATA_DIR="+t.TempDir())
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `"mode":"embedded"`) || !strings.Contains(body, `"redis":"disabled"`) {
		t.Errorf("/readyz = %d %s", rec.Code, body)
	}
}

// TestEmptyTenantsFile: "tenants: []" (the shipped files' default) is
// accepted, with one warning at start and one on each reload that still
// lists no tenant, and /readyz says so while it lasts.
func TestEmptyTenantsFile(t *testing.T) {
	file := writeFile(t, filepath.Join(t.TempDir(), "tenants.yaml"), "tenants: []\n")
	logs := newLineWriter()
	gw := wireGateway(t, gatewayOptions{Logger: slog.New(slog.NewJSONHandler(logs, nil))},
		"CORRAL_TENANTS_FILE="+file, "CORRAL_DATA_DIR="+t.TempDir())
	warnings := func() int { return strings.Count(logs.String(), `"msg":"`+noTenantsWarning+`"`) }
	readyz := func() (int, string) {
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return rec.Code, rec.Body.String()
	}
	if n := warnings(); n != 1 {
		t.Errorf("warnings at start = %d; want 1 in:\n%s", n, logs)
	}
	if code, body := readyz(); code != 200 || !strings.Contains(body, `"tenants":0`) || !strings.Contains(body, `"warning":"`+noTenantsWarning+`"`) {
		t.Errorf("/readyz = %d %s; want 200 with tenants 0 and the warning", code, body)
	}
	if _, err := gw.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	if n := warnings(); n != 2 {
		t.Errorf("warnings after a reload of the same file = %d; want 2", n)
	}

	// A tenant added and reloaded: no warning, /readyz counts it.
	writeFile(t, file, "tenants:\n"+tenantYAML("acme", tenant.HashKey("sk-x")))
	if _, err := gw.srv.Reload(); err != nil {
		t.Fatal(err)
	}
	code, body := readyz()
	if n := warnings(); code != 200 || n != 2 || !strings.Contains(body, `"tenants":1`) || strings.Contains(body, "warning") {
		t.Errorf("after adding a tenant: /readyz %d %s, %d warnings; want tenants 1, no warning, still 2", code, body, warnings())
	}
}

// TestIdleReadyzFollowsRedis: an instance no request reaches reports a
// Redis that died, and one that came back, in /readyz within 3 s, both
// ways, through its background probe: for a Redis killed (connections
// refused) and for one hung (SIGSTOP: connections accepted, nothing
// answered).
func TestIdleReadyzFollowsRedis(t *testing.T) {
	rs := redistest.Start(t)
	if !rs.Stoppable() {
		t.Skip("needs a redis-server the test controls")
	}
	mock := serveMock(t, mockllm.Options{})
	gw := mustGateway(t,
		"CORRAL_REDIS_URL="+rs.URL(),
		"CORRAL_UPSTREAM_URL="+mock.URL+"/v1",
		"CORRAL_TENANTS_FILE="+writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-idle"))))
	srv := serveGateway(t, gw)
	redisState := func() string {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&v)
		s, _ := v["redis"].(string)
		return s
	}
	// within polls /readyz, as an orchestrator's probe would, until it says
	// want; 3 s is the bound /readyz promises.
	within := func(what, want string) {
		t.Helper()
		start := time.Now()
		for got := redisState(); got != want; got = redisState() {
			if time.Since(start) > 3*time.Second {
				t.Fatalf("%s: /readyz still says redis %q after 3s; want %q", what, got, want)
			}
			time.Sleep(20 * time.Millisecond) // the poll's own pace, not a synchronisation
		}
	}
	within("at start", "ok")
	rs.Stop()
	within("Redis killed", "unreachable")
	rs.Restart()
	within("Redis restarted", "ok")
	rs.Pause()
	within("Redis hung", "unreachable")
	rs.Resume()
	within("Redis resumed", "ok")
}
