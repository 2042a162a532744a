package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/spend"
)

// pricedCatalog prices the models pricedUpstream answers with (nano-dollars
// per token = USD per million tokens × 1000).
func pricedCatalog() *spend.Live {
	return spend.NewLive(spend.NewCatalog([]spend.Price{
		{Model: "gpt-4o-mini*", Input: 150, CachedInput: 75, CacheWrite: 150, Output: 600},
		{Model: "gpt-3.5-turbo-instruct*", Input: 1500, CachedInput: 1500, CacheWrite: 1500, Output: 2000},
		{Model: "text-embedding-3-small*", Input: 20, CachedInput: 20, CacheWrite: 20},
		{Model: "gpt-4o*", Input: 2500, CachedInput: 1250, CacheWrite: 2500, Output: 10000},
		{Model: "claude-sonnet-4*", Input: 3000, CachedInput: 300, CacheWrite: 3750, Output: 15000},
	}))
}

var withPrices = withServer(func(so *Options) { so.Prices = pricedCatalog() })

// pricedUpstream answers every API with fixed usage, cached input and
// cache writes included, in each API's own wire format, streamed when
// asked; the model it answers with is a dated snapshot of the one asked
// for, as the providers do.
func pricedUpstream(http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.NewDecoder(r.Body).Decode(&req)
		sse := func(events ...string) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range events {
				_, _ = io.WriteString(w, ev+"\n\n")
			}
		}
		js := func(body string) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, body)
		}
		switch r.URL.Path {
		case "/v1/chat/completions":
			const model = `"model":"gpt-4o-mini-2024-07-18"`
			const usage = `"usage":{"prompt_tokens":1000,"completion_tokens":200,"total_tokens":1200,"prompt_tokens_details":{"cached_tokens":400,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":0}}`
			if req.Stream {
				head := `"id":"chatcmpl-p1","object":"chat.completion.chunk","created":1733000000,` + model
				sse(`data: {`+head+`,"choices":[{"index":0,"delta":{"role":"assistant","content":"priced"},"finish_reason":null}]}`,
					`data: {`+head+`,"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
					`data: {`+head+`,"choices":[],`+usage+`}`,
					`data: [DONE]`)
				return
			}
			js(`{"id":"chatcmpl-p1","object":"chat.completion","created":1733000000,` + model + `,"choices":[{"index":0,"message":{"role":"assistant","content":"priced"},"finish_reason":"stop"}],` + usage + `}`)
		case "/v1/completions":
			const usage = `"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60}`
			head := `"id":"cmpl-p1","object":"text_completion","created":1733000000,"model":"gpt-3.5-turbo-instruct-0914"`
			if req.Stream {
				sse(`data: {`+head+`,"choices":[{"text":"priced","index":0,"logprobs":null,"finish_reason":null}]}`,
					`data: {`+head+`,"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"stop"}]}`,
					`data: {`+head+`,"choices":[],`+usage+`}`,
					`data: [DONE]`)
				return
			}
			js(`{` + head + `,"choices":[{"text":"priced","index":0,"logprobs":null,"finish_reason":"stop"}],` + usage + `}`)
		case "/v1/embeddings":
			js(`{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`)
		case "/v1/responses":
			resp := `{"id":"resp_p1","object":"response","created_at":1733000000,"status":"completed","model":"gpt-4o-2024-08-06","output":[{"type":"message","id":"msg_p1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"priced","annotations":[]}]}],` +
				`"usage":{"input_tokens":500,"input_tokens_details":{"cached_tokens":128},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":540}}`
			if req.Stream {
				sse("event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_p1\",\"object\":\"response\",\"created_at\":1733000000,\"status\":\"in_progress\",\"model\":\"gpt-4o-2024-08-06\",\"output\":[]}}",
					"event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":"+resp+"}")
				return
			}
			js(resp)
		case "/v1/messages":
			const usage = `{"input_tokens":50,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":300}`
			if req.Stream {
				sse("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_p1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":50,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}",
					"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}",
					"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"priced\"}}",
					"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}",
					"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300}}",
					"event: message_stop\ndata: {\"type\":\"message_stop\"}")
				return
			}
			js(`{"id":"msg_p1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"priced"}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + usage + `}`)
		default:
			http.NotFound(w, r)
		}
	})
}

// TestCostTable: for each API, streamed and not, with cached input and
// cache writes, the cost of a MISS and the saving of the HIT that follows
// equal the hand computation to the nano-dollar, in the access line and in
// the usage API; the usage totals equal the sum of the access lines.
func TestCostTable(t *testing.T) {
	var logs logtest.Buffer
	h := newHarness(t, withAnthropic, withAdmin, withPrices, func(o *harnessOptions) {
		o.logs = &logs
		o.wrapUpstream = pricedUpstream
	})
	tests := []struct {
		name, path, body string
		anthropic        bool
		want             spend.Nanodollars
	}{
		// 600 uncached × 150 + 400 cached × 75 + 200 out × 600.
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a"}]}`, false, 240_000},
		{"chat streamed", "/v1/chat/completions", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"b"}]}`, false, 240_000},
		// 50 × 1500 + 10 × 2000.
		{"completions", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"a"}`, false, 95_000},
		{"completions streamed", "/v1/completions", `{"model":"gpt-3.5-turbo-instruct","prompt":"b","stream":true}`, false, 95_000},
		// 8 × 20.
		{"embeddings", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"a"}`, false, 160},
		// 372 uncached × 2500 + 128 cached × 1250 + 40 × 10000.
		{"responses", "/v1/responses", `{"model":"gpt-4o","input":"a"}`, false, 1_490_000},
		{"responses streamed", "/v1/responses", `{"model":"gpt-4o","input":"b","stream":true}`, false, 1_490_000},
		// 50 × 3000 + 2000 cache reads × 300 + 1000 cache writes × 3750 + 300 × 15000.
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"a"}]}`, true, 9_000_000},
		{"messages streamed", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"b"}]}`, true, 9_000_000},
	}
	ctx := context.Background()
	for _, tt := range tests {
		hdr := []string{"Authorization", "Bearer " + acmeKey}
		if tt.anthropic {
			hdr = []string{"X-Api-Key", acmeKey, "Anthropic-Version", "2023-06-01"}
		}
		for _, cache := range []string{"MISS", "HIT"} {
			a := sendWith(ctx, h.gw.URL+tt.path, tt.body, append(hdr, "X-Request-Id", reqID(tt.name, cache))...)
			if a.err != nil || a.status != http.StatusOK || a.header.Get("X-Corral-Cache") != cache {
				t.Fatalf("%s %s: %d %s %v %s", tt.name, cache, a.status, a.header.Get("X-Corral-Cache"), a.err, a.body)
			}
		}
	}
	// Each MISS line carries its cost, each HIT line its saving, never
	// both. (Requests on one kept-alive connection: each line is written
	// before the next request is read.)
	type money struct{ cost, saved *spend.Nanodollars }
	lines := map[string]money{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var l struct {
			Msg   string             `json:"msg"`
			ID    string             `json:"request_id"`
			Cost  *spend.Nanodollars `json:"cost_usd"`
			Saved *spend.Nanodollars `json:"saved_usd"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" {
			lines[l.ID] = money{l.Cost, l.Saved}
		}
	}
	var cost, saved spend.Nanodollars
	for _, tt := range tests {
		miss, hit := lines[reqID(tt.name, "MISS")], lines[reqID(tt.name, "HIT")]
		if miss.cost == nil || *miss.cost != tt.want || miss.saved != nil {
			t.Errorf("%s: MISS line cost_usd %v saved_usd %v; want cost %s only", tt.name, miss.cost, miss.saved, tt.want)
			continue
		}
		if hit.saved == nil || *hit.saved != tt.want || hit.cost != nil {
			t.Errorf("%s: HIT line cost_usd %v saved_usd %v; want saved %s only", tt.name, hit.cost, hit.saved, tt.want)
			continue
		}
		cost += *miss.cost
		saved += *hit.saved
	}
	var u struct {
		CostUSD       spend.Nanodollars `json:"cost_usd"`
		SavedUSD      spend.Nanodollars `json:"saved_usd"`
		UnpricedCalls int64             `json:"unpriced_calls"`
		ByModel       map[string]struct {
			Requests      int64             `json:"requests"`
			UpstreamCalls int64             `json:"upstream_calls"`
			CostUSD       spend.Nanodollars `json:"cost_usd"`
			SavedUSD      spend.Nanodollars `json:"saved_usd"`
		} `json:"by_model"`
	}
	// A leader's call is counted by its flight once the call has ended,
	// which can come after its client has the answer (and after the HIT
	// that follows): poll until the last call is in, then compare.
	readUsage := func() {
		code, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/acme/usage", adminToken)
		u.ByModel = nil
		if err := json.Unmarshal([]byte(body), &u); code != http.StatusOK || err != nil {
			t.Fatalf("usage: %d %s %v", code, body, err)
		}
	}
	waitFor(t, func() bool { readUsage(); return u.CostUSD >= cost })
	if u.CostUSD != cost || u.SavedUSD != saved || u.UnpricedCalls != 0 {
		t.Errorf("usage: cost %s, saved %s, unpriced %d; want the access lines' %s and %s, 0 unpriced", u.CostUSD, u.SavedUSD, u.UnpricedCalls, cost, saved)
	}
	// by_model names the model that answered, not the price's glob
	// (claude-sonnet-4*).
	if m := u.ByModel["claude-sonnet-4-5-20250929"]; m.Requests != 4 || m.UpstreamCalls != 2 || m.CostUSD != 18_000_000 || m.SavedUSD != 18_000_000 {
		t.Errorf("by_model claude-sonnet-4-5-20250929 = %+v; want 4 requests, 2 calls, $0.018 spent and saved (all: %v)", m, u.ByModel)
	}
}

// TestUnpricedCallsCounted: a model the catalog does not price costs 0 and
// is counted as unpriced, under its own name.
func TestUnpricedCallsCounted(t *testing.T) {
	h := newHarness(t, withAdmin, withPrices)
	ctx := context.Background()
	if a := send(ctx, h.gw.URL, acmeKey, `{"model":"llama-3-70b","messages":[{"role":"user","content":"x"}]}`); a.status != http.StatusOK {
		t.Fatalf("%d %s", a.status, a.body)
	}
	_, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/acme/usage", adminToken)
	var u struct {
		CostUSD       spend.Nanodollars `json:"cost_usd"`
		UnpricedCalls int64             `json:"unpriced_calls"`
		ByModel       map[string]struct {
			UpstreamCalls int64 `json:"upstream_calls"`
		} `json:"by_model"`
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	if u.CostUSD != 0 || u.UnpricedCalls != 1 || u.ByModel["llama-3-70b"].UpstreamCalls != 1 {
		t.Errorf("usage = %s; want cost 0, 1 unpriced call under llama-3-70b", body)
	}
}

// TestBypassCallsAreCountedInUsage: BYPASS calls (Cache-Control:
// no-store; Codex's every request, for its hosted tools) by a tenant
// without a budget are counted in its usage like a leader's call: one
// upstream call each, their tokens, their cost by model, and cost_usd in
// the access line. They were counted as calls only, at no cost.
func TestBypassCallsAreCountedInUsage(t *testing.T) {
	var logs logtest.Buffer
	h := newHarness(t, withAdmin, withPrices, func(o *harnessOptions) {
		o.logs = &logs
		o.wrapUpstream = pricedUpstream
	})
	ctx := context.Background()
	for i, body := range []string{
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"bypassed"}]}`,
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"bypassed, streamed"}]}`,
	} {
		a := send(ctx, h.gw.URL, acmeKey, body, "Cache-Control", "no-store", "X-Request-Id", fmt.Sprintf("bypass-%d", i))
		if a.status != http.StatusOK || a.header.Get("X-Corral-Cache") != cacheBypass {
			t.Fatalf("call %d: %d %s %s", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	// A request is counted before its access line is written: once both
	// lines are there, the usage holds both calls.
	waitFor(t, func() bool { return logs.Count(`"request_id":"bypass-`) == 2 })
	_, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/acme/usage", adminToken)
	var u struct {
		UpstreamCalls int64             `json:"upstream_calls"`
		Tokens        int64             `json:"tokens"`
		Bypass        int64             `json:"bypass"`
		CostUSD       spend.Nanodollars `json:"cost_usd"`
		ByModel       map[string]struct {
			UpstreamCalls int64             `json:"upstream_calls"`
			InputTokens   int64             `json:"input_tokens"`
			OutputTokens  int64             `json:"output_tokens"`
			CostUSD       spend.Nanodollars `json:"cost_usd"`
		} `json:"by_model"`
	}
	if err := json.Unmarshal([]byte(body), &u); err != nil {
		t.Fatal(err)
	}
	// Each: 600 uncached × 150 + 400 cached × 75 + 200 out × 600.
	m := u.ByModel["gpt-4o-mini-2024-07-18"] // the model that answered
	if u.UpstreamCalls != 2 || u.Bypass != 2 || u.Tokens != 2400 || u.CostUSD != 480_000 ||
		m.UpstreamCalls != 2 || m.InputTokens != 2000 || m.OutputTokens != 400 || m.CostUSD != 480_000 {
		t.Errorf("usage after two BYPASS calls = %s; want 2 upstream calls, 2,400 tokens, $0.00048 under gpt-4o-mini-2024-07-18", body)
	}
	costs := map[string]spend.Nanodollars{}
	for _, line := range strings.Split(logs.String(), "\n") {
		var l struct {
			Msg  string             `json:"msg"`
			ID   string             `json:"request_id"`
			Cost *spend.Nanodollars `json:"cost_usd"`
		}
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "request" && l.Cost != nil {
			costs[l.ID] = *l.Cost
		}
	}
	for i := range 2 {
		if id := fmt.Sprintf("bypass-%d", i); costs[id] != 240_000 {
			t.Errorf("%s: access line cost_usd %s; want 0.00024", id, costs[id])
		}
	}
}

// reqID is a request id naming a table row and its cache status.
func reqID(name, cache string) string { return strings.ReplaceAll(name, " ", "-") + "-" + cache }
