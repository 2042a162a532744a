package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/upstream"
)

// TestCostFollowsTheAliasKey: when the model a cloud answered with has no
// price (a deployment's own name), the call is priced by the alias key of
// the answering upstream that the request matched, before the requested
// name: on the MISS, on the HIT's saving and on a BYPASS.
func TestCostFollowsTheAliasKey(t *testing.T) {
	deployment := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"chatcmpl-a1","object":"chat.completion","created":1733000000,"model":"contoso-deployment-7",`+
			`"choices":[{"index":0,"message":{"role":"assistant","content":"priced"},"finish_reason":"stop"}],`+
			`"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200}}`)
	}))
	t.Cleanup(deployment.Close)
	c, err := upstream.New(upstream.Options{BaseURL: deployment.URL + "/v1", APIKey: upstreamKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var logs logtest.Buffer
	h := newHarness(t, withServer(func(so *Options) {
		// The requested name has a price of its own, the alias key another:
		// which one priced the call shows in its cost.
		so.Prices = spend.NewLive(spend.NewCatalog([]spend.Price{
			{Model: "my-gpt-mini", Input: 150, CachedInput: 150, CacheWrite: 150, Output: 600},
			{Model: "my-gpt*", Input: 2500, CachedInput: 1250, CacheWrite: 2500, Output: 10000},
		}))
		so.Upstreams = cloudsRouter(cloudMember{&pool.Member{Name: "azure-east", API: "openai", Provider: "azure",
			Aliases: []string{"my-gpt*"}, Models: []string{"my-gpt*"}, Weight: 1}, c})
	}), func(o *harnessOptions) { o.logs = &logs })
	ctx := context.Background()
	body := `{"model":"my-gpt-mini","messages":[{"role":"user","content":"alias priced"}]}`
	for _, tt := range []struct{ id, cache, control string }{{"alias-MISS", "MISS", ""}, {"alias-HIT", "HIT", ""}, {"alias-BYPASS", "BYPASS", "no-store"}} {
		hdr := []string{"Authorization", "Bearer " + acmeKey, "X-Request-Id", tt.id}
		if tt.control != "" {
			hdr = append(hdr, "Cache-Control", tt.control)
		}
		if a := sendWith(ctx, h.gw.URL+"/v1/chat/completions", body, hdr...); a.status != 200 || a.header.Get("X-Corral-Cache") != tt.cache {
			t.Fatalf("%s: %d %s %s", tt.id, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	// 1000 × 2500 + 200 × 10000, at the alias key's price (the requested
	// name's would be 1000 × 150 + 200 × 600 = 270_000).
	const want = spend.Nanodollars(4_500_000)
	got := map[string][2]*spend.Nanodollars{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var l struct {
			Msg   string             `json:"msg"`
			ID    string             `json:"request_id"`
			Cost  *spend.Nanodollars `json:"cost_usd"`
			Saved *spend.Nanodollars `json:"saved_usd"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" {
			got[l.ID] = [2]*spend.Nanodollars{l.Cost, l.Saved}
		}
	}
	for id, field := range map[string]int{"alias-MISS": 0, "alias-HIT": 1, "alias-BYPASS": 0} {
		if v := got[id][field]; v == nil || *v != want {
			t.Errorf("%s: cost/saved %v; want %s", id, got[id], want)
		}
	}
}
