package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// budgetsOf is the budgets of a GET /admin/tenants/{id}/usage answer.
func budgetsOf(t *testing.T, base, id string) []any {
	t.Helper()
	b, _ := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/"+id+"/usage", "")["budgets"].([]any)
	if len(b) == 0 {
		t.Fatalf("no budgets for %s", id)
	}
	return b
}

// TestEmbeddedRestartKeepsSpendAndUsage: a real embedded gateway process
// spends a tenant's day budget and is restarted on the same data dir: the
// new process refuses the tenant's next call (the budget is not
// re-granted) and answers the same budgets and chargeback rows.
func TestEmbeddedRestartKeepsSpendAndUsage(t *testing.T) {
	mock := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t, tenantYAML("payer", tenant.HashKey("sk-payer"), `budget_usd_per_day: "0.000001"`, "budget_usd_per_month: 1"))
	env := []string{
		"CORRAL_UPSTREAM_URL=" + mock.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_PRICES_FILE=../../deploy/prices.yaml",
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_DATA_DIR=" + t.TempDir(),
	}
	bin := buildGateway(t)
	base, cmd := startGateway(t, bin, env)
	if code := chatCode(t, base, "sk-payer", "spends the day"); code != 200 {
		t.Fatalf("first call: %d", code)
	}
	if code := chatCode(t, base, "sk-payer", "over the day's budget"); code != http.StatusTooManyRequests {
		t.Fatalf("second call: %d; want 429 (the day's budget is spent)", code)
	}
	day := time.Now().UTC().Format(time.DateOnly)
	usagePath := "/admin/usage?from=" + day + "&to=" + day
	budgets := budgetsOf(t, base, "payer")
	days := mustAdmin(t, http.StatusOK, base, "GET", usagePath, "")
	if n := upstreamCalls(days); n != 1 {
		t.Fatalf("usage rows count %v upstream calls; want 1", n)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_, _ = cmd.Process.Wait()
	base, _ = startGateway(t, bin, env)
	if after := budgetsOf(t, base, "payer"); !reflect.DeepEqual(after, budgets) {
		t.Errorf("budgets after the restart: %v; before %v", after, budgets)
	}
	if got := mustAdmin(t, http.StatusOK, base, "GET", usagePath, ""); !reflect.DeepEqual(got, days) {
		t.Errorf("usage rows after the restart:\n%v\nbefore:\n%v", got, days)
	}
	if code := chatCode(t, base, "sk-payer", "after the restart"); code != http.StatusTooManyRequests {
		t.Errorf("after the restart: %d; want 429 (the budget must not be re-granted)", code)
	}
}

// TestKilledInstanceReservationExpires: a gateway process killed while
// its upstream call runs never settles that call's reservation; another
// gateway on the same Redis refuses the tenant while it holds, and admits
// it again once the reservation's hold (leader wait + upstream timeout +
// 5 s) has passed, with nothing reserved.
func TestKilledInstanceReservationExpires(t *testing.T) {
	rs := redistest.Start(t)
	mock := mockllm.New(mockllm.Options{})
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "hangs upstream") {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	t.Cleanup(func() { close(release) })
	file := writeTenantsFile(t, tenantYAML("payer", tenant.HashKey("sk-payer"), `budget_usd_per_day: "0.000001"`))
	env := []string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + up.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_PRICES_FILE=../../deploy/prices.yaml",
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_UPSTREAM_TIMEOUT=3s",
		"CORRAL_LEADER_WAIT=1s",
	}
	bin := buildGateway(t)
	dying, cmd := startGateway(t, bin, env)
	other, _ := startGateway(t, bin, env)
	go func() { _, _, _ = postChat(dying, "sk-payer", "hangs upstream") }()
	reserved := func() float64 {
		v, _ := budgetsOf(t, other, "payer")[0].(map[string]any)["reserved_usd"].(float64)
		return v
	}
	within(t, 2*time.Second, "the call's reservation is visible", func() bool { return reserved() > 0 })
	_ = cmd.Process.Kill() // mid-call: its reservation is never settled
	_, _ = cmd.Process.Wait()
	killed := time.Now()
	if code := chatCode(t, other, "sk-payer", "while the dead call holds the budget"); code != http.StatusTooManyRequests {
		t.Errorf("while the reservation holds: %d; want 429", code)
	}
	within(t, 15*time.Second, "the dead call's reservation expires", func() bool { return reserved() == 0 })
	t.Logf("released %v after the kill", time.Since(killed).Round(100*time.Millisecond))
	if code := chatCode(t, other, "sk-payer", "after the hold"); code != 200 {
		t.Errorf("after the dead call's hold: %d; want 200", code)
	}
}
