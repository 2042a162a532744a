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
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestEmbeddedOwnershipSurvivesRestart runs the wired embedded gateway
// with a data dir: a stored response tenant A made is still A's (and
// still not B's) after the gateway is closed and started again.
func TestEmbeddedOwnershipSurvivesRestart(t *testing.T) {
	fake := objectstest.New()
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	dir := t.TempDir()
	file := filepath.Join(dir, "tenants.yaml")
	yaml := "tenants:\n" +
		"  - id: a\n    keys: [{sha256: \"" + tenant.HashKey("sk-a") + "\"}]\n" +
		"  - id: b\n    keys: [{sha256: \"" + tenant.HashKey("sk-b") + "\"}]\n"
	if err := os.WriteFile(file, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cfg, err := config.Load([]string{
		"CORRAL_UPSTREAM_URL=" + up.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_DATA_DIR=" + data,
	})
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*gateway, *httptest.Server) {
		gw, err := newGateway(context.Background(), cfg, gatewayOptions{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		return gw, httptest.NewServer(gw)
	}
	call := func(srv *httptest.Server, method, path, key, body string) (int, string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	gw, srv := start()
	code, body := call(srv, "POST", "/v1/responses", "sk-a", `{"model":"m","input":"hi"}`)
	var r struct{ ID string }
	if err := json.Unmarshal([]byte(body), &r); code != 200 || err != nil || r.ID == "" {
		t.Fatalf("create = %d %s", code, body)
	}
	srv.Close()
	gw.Close()
	if _, err := os.Stat(filepath.Join(data, objects.BoltFile)); err != nil {
		t.Fatalf("no ownership file in the data dir: %v", err)
	}

	gw, srv = start()
	defer gw.Close()
	defer srv.Close()
	if code, body := call(srv, "GET", "/v1/responses/"+r.ID, "sk-a", ""); code != 200 || !strings.Contains(body, r.ID) {
		t.Errorf("after restart, the owner's GET = %d %s", code, body)
	}
	before := len(fake.CallsMentioning(r.ID))
	if code, _ := call(srv, "GET", "/v1/responses/"+r.ID, "sk-b", ""); code != 404 {
		t.Errorf("after restart, another tenant's GET = %d; want 404", code)
	}
	if n := len(fake.CallsMentioning(r.ID)); n != before {
		t.Errorf("another tenant's GET reached the upstream")
	}
}
