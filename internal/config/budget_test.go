package config

import (
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/spend"
)

func TestTenantBudgets(t *testing.T) {
	const file = `tenants:
  - id: acme
    keys: [{sha256: "0000000000000000000000000000000000000000000000000000000000000001"}]
    budget_usd_per_day: 0.01
    budget_usd_per_month: "250"
    unmetered_endpoints: allow
`
	tf, err := ParseTenants("t.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	got := tf.Tenants[0]
	if got.Budget() != (spend.Limits{Day: spend.Cent, Month: 250 * spend.Dollar}) || !got.AllowsUnmetered() {
		t.Errorf("budget = %+v, unmetered %v", got.Budget(), got.AllowsUnmetered())
	}
	bad := strings.Replace(file, "0.01", "-1", 1)
	if _, err := ParseTenants("t.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.yaml:4: tenants[0].budget_usd_per_day: must be 0 (none) or more") {
		t.Errorf("negative budget: %v", err)
	}
	bad = strings.Replace(file, "allow", "sometimes", 1)
	if _, err := ParseTenants("t.yaml", []byte(bad)); err == nil || !strings.Contains(err.Error(), "t.yaml:6: tenants[0].unmetered_endpoints: bad value") {
		t.Errorf("bad unmetered_endpoints: %v", err)
	}
}
