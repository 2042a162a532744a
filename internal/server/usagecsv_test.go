package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/usage"
)

// TestUsageCSVNeutralisesFormulas: a text cell of the CSV export (a
// tenant id, a model name) that a spreadsheet would read as a formula
// (starting with =, +, -, @, tab, CR or NUL) is prefixed with a single
// quote, and every text cell is quoted so no separator inside it (a comma,
// or the semicolon of locales that separate with one) starts a new cell;
// the figures stay bare numbers.
func TestUsageCSVNeutralisesFormulas(t *testing.T) {
	day := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	mem := usage.NewMemoryAt(func() time.Time { return day })
	h := newHarness(t, withAdmin, withServer(func(so *Options) { so.Usage = mem }), func(o *harnessOptions) {
		o.tenants = append(o.tenants, tenant.Spec{ID: "-2-3", KeySHA256: []string{tenant.HashKey("sk-minus")}, Policy: tenant.Policy{MaxLeaders: 1}})
	})
	one := usage.ModelCounters{Requests: 1, UpstreamCalls: 1, InputTokens: 10, OutputTokens: 2, CostNanos: 1500}
	mem.Add("-2-3", usage.Counters{ByModel: map[string]usage.ModelCounters{"gpt-4o": one}})
	models := []string{`=HYPERLINK("http://x","y")`, "+1", "-2-3", "@SUM(1)", "\tx", "\rx", "\x00x", "a;=1+2", "a,b", "plain"}
	byModel := map[string]usage.ModelCounters{}
	for _, m := range models {
		byModel[m] = one
	}
	mem.Add("acme", usage.Counters{ByModel: byModel})

	req := objectstest.NewRequest(t, "GET", h.gw.URL+"/admin/usage?from=2026-12-01&to=2026-12-01", adminToken, "")
	req.Header.Set("Accept", "text/csv")
	code, body := objectstest.Do(t, req)
	row := `,1,1,10,2,0.0000015,0` + "\n"
	want := "tenant,day,model,requests,upstream_calls,input_tokens,output_tokens,cost_usd,saved_usd\n" +
		`"'-2-3","2026-12-01","gpt-4o"` + row +
		`"acme","2026-12-01","'` + "\x00" + `x"` + row +
		`"acme","2026-12-01","'` + "\t" + `x"` + row +
		`"acme","2026-12-01","'` + "\r" + `x"` + row +
		`"acme","2026-12-01","'+1"` + row +
		`"acme","2026-12-01","'-2-3"` + row +
		`"acme","2026-12-01","'=HYPERLINK(""http://x"",""y"")"` + row +
		`"acme","2026-12-01","'@SUM(1)"` + row +
		`"acme","2026-12-01","a,b"` + row +
		`"acme","2026-12-01","a;=1+2"` + row +
		`"acme","2026-12-01","plain"` + row
	if code != http.StatusOK || body != want {
		t.Errorf("CSV: %d\n got %q\nwant %q", code, body, want)
	}
}
