package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestDistributedWiring runs the wired gateway against a real Redis and
// the mock model: a request is stored in Redis, /readyz reports the mode
// and Redis state, and a Redis outage degrades without failing requests.
func TestDistributedWiring(t *testing.T) {
	rs := redistest.Start(t)
	mock := httptest.NewServer(mockllm.New(mockllm.Options{}))
	t.Cleanup(mock.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.yaml")
	if err := os.WriteFile(file, []byte("tenants:\n  - id: acme\n    keys: [{sha256: \""+tenant.HashKey("sk-wired")+"\"}]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load([]string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + mock.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_ADMIN_TOKEN=adm",
	})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := newGateway(context.Background(), cfg, gatewayOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)

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
}

func TestEmbeddedReadyz(t *testing.T) {
	cfg, err := config.Load([]string{"CORRAL_DATA_DIR=" + t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := newGateway(context.Background(), cfg, gatewayOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(gw.Close)
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	if body := rec.Body.String(); rec.Code != 200 || !strings.Contains(body, `"mode":"embedded"`) || !strings.Contains(body, `"redis":"disabled"`) {
		t.Errorf("/readyz = %d %s", rec.Code, body)
	}
}
