package main

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/redistest"
)

// recreate deletes API tenant id through base, makes it again with
// policy (a JSON object's members after the id, or ""), and returns a key
// of the new tenant.
func recreate(t *testing.T, base, id, policy string) string {
	t.Helper()
	mustAdmin(t, http.StatusOK, base, "DELETE", "/admin/tenants/"+id, "")
	body := `{"id":"` + id + `"`
	if policy != "" {
		body += "," + policy
	}
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", body+"}")
	key, _ := newKeyOn(t, base, id, "")
	return key
}

// TestRecreatedTenantDoesNotOwnTheOldObjects: the files, batches and
// stored responses of a deleted API tenant are not the tenant made again
// under its id: each request naming them is the 404 of an unknown id and
// never reaches the upstream.
func TestRecreatedTenantDoesNotOwnTheOldObjects(t *testing.T) {
	rs := redistest.Start(t)
	fake := objectstest.New()
	up := httptest.NewServer(fake)
	t.Cleanup(up.Close)
	base := serveGateway(t, mustGateway(t, "CORRAL_REDIS_URL="+rs.URL(), "CORRAL_UPSTREAM_URL="+up.URL+"/v1",
		"CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir())).URL
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"reused"}`)
	old, _ := newKeyOn(t, base, "reused", "")
	owned := objectstest.CreateAsOwner(t, []string{base}, old)
	key := recreate(t, base, "reused", "")
	objectstest.CheckOthersRefused(t, base, key, owned, func(id string) int { return len(fake.CallsMentioning(id)) })
}

// gatedModel holds every chat call until open is closed, and tells arrived
// of each call that reached it.
type gatedModel struct {
	next    http.Handler
	arrived chan struct{}
	open    chan struct{}
}

func (g gatedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case g.arrived <- struct{}{}:
	default:
	}
	<-g.open
	g.next.ServeHTTP(w, r)
}

// TestCallInFlightAcrossDeleteIsNotServedToTheNewTenant: a call of a
// tenant deleted while its upstream call was in flight stores its answer
// after the DELETE's purge; the tenant made again under the id gets a
// MISS for the same prompt, not that answer.
func TestCallInFlightAcrossDeleteIsNotServedToTheNewTenant(t *testing.T) {
	rs := redistest.Start(t)
	g := gatedModel{next: mockllm.New(mockllm.Options{}), arrived: make(chan struct{}, 1), open: make(chan struct{})}
	up := httptest.NewServer(g)
	t.Cleanup(up.Close)
	var once sync.Once
	release := func() { once.Do(func() { close(g.open) }) }
	t.Cleanup(release)
	base := serveGateway(t, mustGateway(t, "CORRAL_REDIS_URL="+rs.URL(), "CORRAL_UPSTREAM_URL="+up.URL+"/v1",
		"CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir())).URL
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"inflight"}`)
	old, _ := newKeyOn(t, base, "inflight", "")
	type answer struct {
		code  int
		cache string
		err   error
	}
	first := make(chan answer, 1)
	go func() {
		code, cache, err := postChat(base, old, "asked across the delete")
		first <- answer{code, cache, err}
	}()
	select {
	case <-g.arrived:
	case <-time.After(10 * time.Second):
		t.Fatal("the old tenant's call never reached the upstream")
	}
	key := recreate(t, base, "inflight", "")
	release()
	if a := <-first; a.code != 200 || a.cache != "MISS" || a.err != nil {
		t.Fatalf("the call in flight: %d %s %v; want 200 MISS", a.code, a.cache, a.err)
	}
	if code, cache, err := postChat(base, key, "asked across the delete"); code != 200 || cache != "MISS" || err != nil {
		t.Errorf("the new tenant's same prompt: %d %s %v; want 200 MISS (the old tenant's answer is not its)", code, cache, err)
	}
}

// TestRecreatedTenantStartsWithNoUsageOrSpend: the usage, cost and
// budget spend of a deleted API tenant are not the new tenant's.
func TestRecreatedTenantStartsWithNoUsageOrSpend(t *testing.T) {
	rs := redistest.Start(t)
	base := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL(), "CORRAL_PRICES_FILE=../../deploy/prices.yaml"}, mockllm.New(mockllm.Options{}), 1)[0]
	const policy = `"budget_usd_per_day":5`
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"spender",`+policy+`}`)
	old, _ := newKeyOn(t, base, "spender", "")
	for i := range 3 {
		if code := chatCode(t, base, old, "spend "+string(rune('a'+i))); code != 200 {
			t.Fatalf("old tenant's call: %d", code)
		}
	}
	within(t, 5*time.Second, "the old tenant's usage counted", func() bool {
		u := usageOf(t, base, "spender")
		return num(t, u["requests"]) == 3 && num(t, u["upstream_calls"]) == 3 && nanos(t, u["cost_usd"]) > 0
	})
	spentBefore := daySpent(t, base, "spender")
	if spentBefore <= 0 {
		t.Fatalf("the old tenant spent %v of its day's budget; want its three calls", spentBefore)
	}
	key := recreate(t, base, "spender", policy)
	if code := chatCode(t, base, key, "the new tenant's first call"); code != 200 {
		t.Fatalf("new tenant's call: %d", code)
	}
	within(t, 5*time.Second, "the new tenant's call counted", func() bool { return num(t, usageOf(t, base, "spender")["requests"]) >= 1 })
	u := usageOf(t, base, "spender")
	if num(t, u["requests"]) != 1 || num(t, u["upstream_calls"]) != 1 {
		t.Errorf("the new tenant's usage: %v; want its one request and one upstream call", u)
	}
	// One call of about the size of each of the old tenant's three.
	if spent := daySpent(t, base, "spender"); spent <= 0 || spent >= spentBefore {
		t.Errorf("the new tenant spent %v of its day's budget after one call; the old one %v after three", spent, spentBefore)
	}
}

// daySpent is what tenant id spent of its daily budget, in USD.
func daySpent(t *testing.T, base, id string) float64 {
	t.Helper()
	for _, b := range mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/"+id+"/usage", "")["budgets"].([]any) {
		if bm := b.(map[string]any); bm["period"] == "day" {
			spent, _ := bm["spent_usd"].(float64)
			return spent
		}
	}
	t.Fatalf("%s has no daily budget", id)
	return 0
}
