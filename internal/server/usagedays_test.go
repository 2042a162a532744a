package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/usage"
)

// TestUsageDaysRollAtMidnightUTC: GET /admin/usage has one row per tenant,
// day and model; a call a second after 00:00 UTC lands on the new day (on
// the injected clock); the rows sum to the tenant's usage; CSV holds the
// same rows.
func TestUsageDaysRollAtMidnightUTC(t *testing.T) {
	clk := &testClock{now: time.Date(2026, 12, 1, 23, 59, 59, 0, time.UTC)}
	h := newHarness(t, withAdmin, withPrices, withServer(func(so *Options) {
		so.Now = clk.Now
		mem := cache.NewMemory(cache.MemoryOptions{Now: clk.Now})
		t.Cleanup(func() { _ = mem.Close() })
		so.Cache = mem
	}), func(o *harnessOptions) { o.wrapUpstream = pricedUpstream })
	ctx := context.Background()
	for _, c := range []struct{ text, cache string }{{"day one", "MISS"}, {"day one", "HIT"}} {
		if a := send(ctx, h.gw.URL, acmeKey, cappedChat(c.text)); a.header.Get("X-Corral-Cache") != c.cache {
			t.Fatalf("%s: %d %v", c.text, a.status, a.header)
		}
	}
	clk.Advance(2 * time.Second) // 00:00:01 UTC
	if a := send(ctx, h.gw.URL, acmeKey, cappedChat("day two")); a.header.Get("X-Corral-Cache") != "MISS" {
		t.Fatalf("day two: %d %v", a.status, a.header)
	}
	code, body := adminDo(t, h.gw.URL, "GET", "/admin/usage?from=2026-12-01&to=2026-12-02", adminToken)
	want := `{"from":"2026-12-01","to":"2026-12-02","rows":[` +
		`{"tenant":"acme","day":"2026-12-01","model":"gpt-4o-mini-2024-07-18","requests":2,"upstream_calls":1,"input_tokens":1000,"output_tokens":200,"cost_usd":0.00024,"saved_usd":0.00024},` +
		`{"tenant":"acme","day":"2026-12-02","model":"gpt-4o-mini-2024-07-18","requests":1,"upstream_calls":1,"input_tokens":1000,"output_tokens":200,"cost_usd":0.00024,"saved_usd":0}]}` + "\n"
	if code != http.StatusOK || body != want {
		t.Fatalf("usage days: %d\n got %s\nwant %s", code, body, want)
	}
	req := objectstest.NewRequest(t, "GET", h.gw.URL+"/admin/usage?from=2026-12-01&to=2026-12-02", adminToken, "")
	req.Header.Set("Accept", "text/csv")
	code, csvBody := objectstest.Do(t, req)
	wantCSV := "tenant,day,model,requests,upstream_calls,input_tokens,output_tokens,cost_usd,saved_usd\n" +
		`"acme","2026-12-01","gpt-4o-mini-2024-07-18",2,1,1000,200,0.00024,0.00024` + "\n" +
		`"acme","2026-12-02","gpt-4o-mini-2024-07-18",1,1,1000,200,0.00024,0` + "\n"
	if code != http.StatusOK || csvBody != wantCSV {
		t.Errorf("CSV: %d\n got %q\nwant %q", code, csvBody, wantCSV)
	}
	_, tenantBody := adminDo(t, h.gw.URL, "GET", "/admin/tenants/acme/usage", adminToken)
	var u struct {
		CostUSD json.Number `json:"cost_usd"`
	}
	if err := json.Unmarshal([]byte(tenantBody), &u); err != nil || u.CostUSD != "0.00048" {
		t.Errorf("tenant usage cost = %s (%v); want the rows' sum 0.00048", u.CostUSD, err)
	}
	for _, bad := range []string{"", "?from=2026-12-01", "?from=2026-12-02&to=2026-12-01", "?from=2024-01-01&to=2026-12-01", "?from=12/01/2026&to=2026-12-01"} {
		if code, body := adminDo(t, h.gw.URL, "GET", "/admin/usage"+bad, adminToken); code != http.StatusBadRequest || !strings.Contains(body, `"param":`) {
			t.Errorf("%q: %d %s; want 400 naming the parameter", bad, code, body)
		}
	}
}

// TestUsageDaysSumAcrossInstances: two instances' rows of one day add up
// in Redis.
func TestUsageDaysSumAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 2, withAdmin, withPrices, func(o *harnessOptions) { o.wrapUpstream = pricedUpstream })
	ctx := context.Background()
	for i, base := range h.bases() {
		if a := send(ctx, base, acmeKey, cappedChat("instance "+string(rune('a'+i)))); a.status != 200 {
			t.Fatalf("instance %d: %d", i, a.status)
		}
	}
	for _, srv := range h.srvs {
		if err := srv.usage.(*usage.Redis).Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	today := usage.Day(time.Now())
	_, body := adminDo(t, h.gws[1].URL, "GET", "/admin/usage?from="+today+"&to="+today, adminToken)
	want := `{"tenant":"acme","day":"` + today + `","model":"gpt-4o-mini-2024-07-18","requests":2,"upstream_calls":2,"input_tokens":2000,"output_tokens":400,"cost_usd":0.00048,"saved_usd":0}`
	if !strings.Contains(body, want) {
		t.Errorf("rows = %s; want %s", body, want)
	}
}
