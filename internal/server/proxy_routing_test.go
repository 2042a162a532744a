package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// TestProxiedCallsRouteByModel: a proxied request with a model in its body
// (count_tokens, moderations, ...) goes only to an upstream whose models
// match it, and one that none serves is 404 model_not_found in its API's
// shape, never sent to an upstream that does not serve it.
func TestProxiedCallsRouteByModel(t *testing.T) {
	gpt := newFakeUpstream(t, "gpt", mockllm.Options{})
	llama := newFakeUpstream(t, "llama", mockllm.Options{})
	ant := newFakeUpstream(t, "ant", mockllm.Options{})
	mk := func() *failover.Router {
		clients := map[string]failover.Doer{}
		for _, f := range []*fakeUpstream{gpt, llama, ant} {
			auth := ""
			if f == ant {
				auth = "x-api-key"
			}
			c, err := upstream.New(upstream.Options{BaseURL: f.srv.URL + "/v1", APIKey: f.key, Auth: auth, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			clients[f.name] = c
		}
		ms := []*pool.Member{{Name: "gpt", API: "openai", Weight: 1, Models: []string{"gpt-*", "omni-*"}},
			{Name: "llama", API: "openai", Weight: 1, Models: []string{"llama*"}},
			{Name: "ant", API: "anthropic", Weight: 1, Models: []string{"claude-*"}}}
		return failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: clients}, failover.Options{Timeout: 10 * time.Second})
	}
	h := newHarness(t, func(o *harnessOptions) { o.server = func(so *Options) { so.Upstreams = mk() } })
	ctx := context.Background()

	ct := h.gw.URL + "/v1/messages/count_tokens"
	if a := postMessages(ctx, ct, acmeKey, `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`); a.status != 404 ||
		a.body != `{"type":"error","error":{"type":"not_found_error","message":"The model is not served by any upstream of this gateway."}}` {
		t.Errorf("count_tokens for a model no anthropic upstream serves: %d %s", a.status, a.body)
	}
	if n := ant.calls.Load(); n != 0 {
		t.Errorf("the anthropic upstream got %d calls for a model it does not serve", n)
	}
	if a := postMessages(ctx, ct, acmeKey, `{"model":"claude-x","messages":[{"role":"user","content":"x"}]}`); a.status != 200 || a.header.Get("X-Corral-Upstream") != "ant" {
		t.Errorf("count_tokens for a served model: %d %s %s", a.status, a.header.Get("X-Corral-Upstream"), a.body)
	}
	// OpenAI's proxied endpoints: each call lands where its model lives.
	for range 10 {
		if a := sendTo(ctx, h.gw.URL+"/v1/moderations", acmeKey, `{"model":"llama-guard","input":"x"}`); a.header.Get("X-Corral-Upstream") != "llama" {
			t.Fatalf("moderations for llama-guard went to %q (%d %s)", a.header.Get("X-Corral-Upstream"), a.status, a.body)
		}
	}
	if n := gpt.calls.Load(); n != 0 {
		t.Errorf("the gpt upstream got %d calls for llama-guard", n)
	}
}

// TestUnservedModelIsARefusal: a model no upstream serves is Corral's own
// 404, not an answer: it carries no X-Corral-Cache or Cache-Status on any
// path (cached, bypass, proxied).
func TestUnservedModelIsARefusal(t *testing.T) {
	gpt := newFakeUpstream(t, "gpt", mockllm.Options{})
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) {
			c, err := upstream.New(upstream.Options{BaseURL: gpt.srv.URL + "/v1", APIKey: gpt.key, Timeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			ms := []*pool.Member{{Name: "gpt", API: "openai", Weight: 1, Models: []string{"gpt-*"}}}
			so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]failover.Doer{"gpt": c}}, failover.Options{})
		}
	})
	ctx := context.Background()
	for name, a := range map[string]answer{
		"chat":      sendTo(ctx, h.gw.URL+"/v1/chat/completions", acmeKey, `{"model":"llama","messages":[{"role":"user","content":"x"}]}`),
		"bypass":    sendWith(ctx, h.gw.URL+"/v1/chat/completions", `{"model":"llama","messages":[{"role":"user","content":"x"}]}`, "Authorization", "Bearer "+acmeKey, "Cache-Control", "no-store"),
		"responses": sendTo(ctx, h.gw.URL+"/v1/responses", acmeKey, `{"model":"llama","input":"x"}`),
		"messages":  postMessages(ctx, h.gw.URL+"/v1/messages", acmeKey, `{"model":"claude-x","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`),
		"proxied":   sendTo(ctx, h.gw.URL+"/v1/moderations", acmeKey, `{"model":"llama","input":"x"}`),
	} {
		if a.status != 404 || a.header.Get("X-Corral-Cache") != "" || a.header.Get("Cache-Status") != "" || a.header.Get("X-Corral-Upstream") != "" {
			t.Errorf("%s: %d cache %q status %q upstream %q %s", name, a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Cache-Status"), a.header.Get("X-Corral-Upstream"), a.body)
		}
	}
	if n := gpt.calls.Load(); n != 0 {
		t.Errorf("%d upstream calls", n)
	}
}

func TestProxyRefusesPathEscapes(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/v1/../admin", "/v1/files/..%2f..%2fadmin", "/v1//files", "/v1/files/%2e%2e/x", "/v1/a/./b"} {
		req, _ := http.NewRequest(http.MethodGet, h.gw.URL+p, nil)
		req.URL.RawPath = "" // send the path as written
		req.URL.Opaque = p
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("GET %s = %d; want it refused", p, resp.StatusCode)
		}
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("escaping paths reached the upstream %d times", n)
	}
}

func TestProxyAppliesModelAllowList(t *testing.T) {
	h := newHarness(t)
	resp := post(t, h, "/v1/responses", limitedKey, []byte(`{"model":"o1-pro","input":"x"}`))
	if resp.StatusCode != 403 {
		t.Errorf("proxied body with a forbidden model = %d; want 403", resp.StatusCode)
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0", n)
	}
}
