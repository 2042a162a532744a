package main

import (
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

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
	env := []string{
		"CORRAL_UPSTREAM_URL=" + up.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_DATA_DIR=" + data,
	}
	// Closing the first gateway by hand is the restart; both are closed
	// again, harmlessly, at cleanup.
	start := func() (*gateway, *httptest.Server) {
		gw := mustGateway(t, env...)
		return gw, serveGateway(t, gw)
	}
	gw, srv := start()
	owned := objectstest.CreateAsOwner(t, []string{srv.URL}, "sk-a")
	objectstest.CheckOthersRefused(t, srv.URL, "sk-b", owned, func(id string) int { return len(fake.CallsMentioning(id)) })
	srv.Close()
	gw.Close()
	if _, err := os.Stat(filepath.Join(data, objects.BoltFile)); err != nil {
		t.Fatalf("no ownership file in the data dir: %v", err)
	}

	_, srv = start()
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
