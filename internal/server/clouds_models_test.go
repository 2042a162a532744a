package server

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// TestModelsFromConfigWithClouds: GET /v1/models, in OpenAI's form and in
// Anthropic's (anthropic-version), lists the names the configuration
// gives the API's upstreams when a cloud is among them (alias keys and
// models that are no globs, of every upstream of that API), and calls
// nobody; the API without a cloud still gets its upstream's list.
func TestModelsFromConfigWithClouds(t *testing.T) {
	bedrock, azure := newCloud(t), newCloud(t)
	ant := newFakeUpstream(t, "ant", mockllm.Options{})
	antc, err := upstream.New(upstream.Options{BaseURL: ant.srv.URL + "/v1", APIKey: ant.key, Auth: "x-api-key", Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	mk := func(openaiCloud bool) func(*Options) {
		return func(so *Options) {
			ms := []cloudMember{
				{&pool.Member{Name: "ant", API: "anthropic", Provider: "anthropic", Models: []string{"claude-*", "claude-sonnet-4-5"}, Weight: 1}, antc},
				{&pool.Member{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", Aliases: []string{"claude-sonnet-4-5*", "claude-haiku-4-5"},
					Models: []string{"claude-sonnet-4-5*", "claude-haiku-4-5"}, Weight: 1, Priority: 1}, bedrock},
			}
			if openaiCloud {
				ms = append(ms, cloudMember{&pool.Member{Name: "azure-east", API: "openai", Provider: "azure", Aliases: []string{"gpt-4o*", "gpt-4o-mini"},
					Models: []string{"gpt-4o*", "gpt-4o-mini", "o3"}, Weight: 1}, azure})
			}
			so.Upstreams = cloudsRouter(ms...)
		}
	}
	h := newHarness(t, withServer(mk(true)))
	req := objectstest.NewRequest(t, "GET", h.gw.URL+"/v1/models", acmeKey, "")
	req.Header.Set("anthropic-version", "2023-06-01")
	code, body := objectstest.Do(t, req)
	want := `{"data":[{"type":"model","id":"claude-sonnet-4-5","display_name":"claude-sonnet-4-5","created_at":"1970-01-01T00:00:00Z"},` +
		`{"type":"model","id":"claude-haiku-4-5","display_name":"claude-haiku-4-5","created_at":"1970-01-01T00:00:00Z"}],` +
		`"has_more":false,"first_id":"claude-sonnet-4-5","last_id":"claude-haiku-4-5"}`
	if code != 200 || strings.TrimSpace(body) != want {
		t.Errorf("Anthropic's form: %d %s; want 200 %s", code, body, want)
	}
	code, body = objectstest.Call(t, "GET", h.gw.URL+"/v1/models", acmeKey, "")
	want = `{"object":"list","data":[{"id":"gpt-4o-mini","object":"model","created":0,"owned_by":"corral"},{"id":"o3","object":"model","created":0,"owned_by":"corral"}]}`
	if code != 200 || strings.TrimSpace(body) != want {
		t.Errorf("OpenAI's form: %d %s; want 200 %s", code, body, want)
	}
	if n := ant.calls.Load() + bedrock.calls.Load() + azure.calls.Load(); n != 0 {
		t.Errorf("listing the models made %d upstream calls; want none", n)
	}

	// Without a cloud on the OpenAI API its list is the upstream's: the
	// OpenAI form is forwarded to it, once.
	gpt := newFakeUpstream(t, "gpt", mockllm.Options{})
	gptc, err := upstream.New(upstream.Options{BaseURL: gpt.srv.URL + "/v1", APIKey: gpt.key, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	h = newHarness(t, withServer(func(so *Options) {
		mk(false)(so)
		so.Upstreams = cloudsRouter(cloudMember{&pool.Member{Name: "gpt", API: "openai", Provider: "openai", Models: []string{"gpt-4o"}, Weight: 1}, gptc},
			cloudMember{&pool.Member{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", Aliases: []string{"claude-haiku-4-5"}, Models: []string{"claude-haiku-4-5"}, Weight: 1}, bedrock})
	}))
	req = objectstest.NewRequest(t, "GET", h.gw.URL+"/v1/models", acmeKey, "")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if n := gpt.calls.Load(); n != 1 || resp.Header.Get("X-Corral-Upstream") != "gpt" {
		t.Errorf("OpenAI's form without a cloud: %d calls at gpt, answered by %q; want it forwarded to gpt once", n, resp.Header.Get("X-Corral-Upstream"))
	}
}
