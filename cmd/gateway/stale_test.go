package main

import (
	"testing"
	"time"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/tenant"
)

// TestTenantSpecsStaleWindows: the CORRAL_STALE_* defaults apply to a
// tenant that does not say, and a tenant's own windows (0 included) win.
func TestTenantSpecsStaleWindows(t *testing.T) {
	file := writeTenantsFile(t,
		tenantYAML("plain", tenant.HashKey("k1")),
		tenantYAML("own", tenant.HashKey("k2"), "stale_while_revalidate: 1m", "stale_if_error: 0s"))
	cfg, err := config.Load([]string{
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_STALE_WHILE_REVALIDATE=10s",
		"CORRAL_STALE_IF_ERROR=1h",
	})
	if err != nil {
		t.Fatal(err)
	}
	specs, err := tenantSpecs(cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][2]time.Duration{}
	for _, s := range specs {
		got[s.ID] = [2]time.Duration{s.StaleWhileRevalidate, s.StaleIfError}
	}
	if want := [2]time.Duration{10 * time.Second, time.Hour}; got["plain"] != want {
		t.Errorf("plain windows = %v, want the defaults %v", got["plain"], want)
	}
	if want := [2]time.Duration{time.Minute, 0}; got["own"] != want {
		t.Errorf("own windows = %v, want %v", got["own"], want)
	}
}
