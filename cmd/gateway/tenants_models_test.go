package main

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/tenant"
)

// TestFileTenantPolicyRoundTrips: GET /admin/tenants shows a file tenant
// without a models line with no "models" at all (absent: every model),
// and one with `models: []` as [] (none); each policy, copied into an API
// tenant, allows what the file tenant allows.
func TestFileTenantPolicyRoundTrips(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t,
		tenantYAML("open", tenant.HashKey("sk-open"), "requests_per_minute: 50"),
		tenantYAML("closed", tenant.HashKey("sk-closed"), "models: []"))
	base := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_TENANTS_FILE="+file, "CORRAL_DATA_DIR="+t.TempDir())).URL
	policies := map[string]map[string]any{}
	for _, x := range mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants", "")["tenants"].([]any) {
		m := x.(map[string]any)
		policies[m["id"].(string)] = m["policy"].(map[string]any)
	}
	if m, ok := policies["open"]["models"]; ok {
		t.Errorf("a file tenant without a models line shows models %v; want the field absent", m)
	}
	if m, ok := policies["closed"]["models"].([]any); !ok || len(m) != 0 {
		t.Errorf("a file tenant with models: [] shows %v; want []", policies["closed"]["models"])
	}
	if got := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/open", "")["policy"].(map[string]any); got["models"] != nil {
		t.Errorf("GET /admin/tenants/open shows models %v; want the field absent", got["models"])
	}
	for _, tt := range []struct {
		from string
		want int
	}{{"open", 200}, {"closed", 403}} {
		if code := chatCode(t, base, "sk-"+tt.from, "file "+tt.from); code != tt.want {
			t.Fatalf("file tenant %s: %d; want %d", tt.from, code, tt.want)
		}
		p := policies[tt.from]
		p["id"] = "copy-of-" + tt.from
		body, _ := json.Marshal(p)
		mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", string(body))
		key, _ := newKeyOn(t, base, "copy-of-"+tt.from, "")
		if code := chatCode(t, base, key, "copy "+tt.from); code != tt.want {
			t.Errorf("API tenant with %s's policy %s: %d; want %d as the file tenant", tt.from, body, code, tt.want)
		}
	}
}
