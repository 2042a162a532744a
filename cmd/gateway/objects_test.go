package main

import (
	"context"
	"log/slog"
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
// with a data dir: the file, batch and stored responses tenant A made are
// A's, and every request of B naming them is a 404 that never reaches the
// upstream, before and after the gateway is closed and started again.
func TestEmbeddedOwnershipSurvivesRestart(t *testing.T) {
	fake := objectstest.New()
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	file := writeTenantsFile(t, tenantYAML("a", tenant.HashKey("sk-a")), tenantYAML("b", tenant.HashKey("sk-b")))
	data := filepath.Join(t.TempDir(), "data")
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
	gw, srv := start()
	owned := objectstest.CreateAsOwner(t, []string{srv.URL}, "sk-a")
	objectstest.CheckOthersRefused(t, srv.URL, "sk-b", owned, func(id string) int { return len(fake.CallsMentioning(id)) })
	srv.Close()
	gw.Close()
	if _, err := os.Stat(filepath.Join(data, objects.BoltFile)); err != nil {
		t.Fatalf("no ownership file in the data dir: %v", err)
	}

	gw, srv = start()
	defer gw.Close()
	defer srv.Close()
	for _, id := range []string{owned.File, owned.Output, owned.Resp, owned.Streamed} {
		path := "/v1/files/" + id
		if strings.HasPrefix(id, "resp_") {
			path = "/v1/responses/" + id
		}
		if code, body := objectstest.Call(t, "GET", srv.URL+path, "sk-a", ""); code != 200 || !strings.Contains(body, id) {
			t.Errorf("after restart, the owner's GET %s = %d %s", path, code, body)
		}
	}
	if code, body := objectstest.Call(t, "GET", srv.URL+"/v1/batches/"+owned.Batch, "sk-a", ""); code != 200 {
		t.Errorf("after restart, the owner's batch GET = %d %s", code, body)
	}
	objectstest.CheckOthersRefused(t, srv.URL, "sk-b", owned, func(id string) int { return len(fake.CallsMentioning(id)) })
}
