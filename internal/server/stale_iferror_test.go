package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/tenant"
)

func ifErrorHarness(t *testing.T, n int, dist bool) (*harness, *testClock, *upstreamControl) {
	return clockedHarness(t, n, dist, ifErrorTenant)
}

// testIfError: past stale_while_revalidate but within stale_if_error, a
// burst of concurrent requests over every instance goes upstream and,
// when the upstream fails transiently (500, 429, dropped connection), is
// answered with the old entry as STALE (coalesced followers too); past
// stale_if_error the failure itself comes back; a 404 passes through.
func testIfError(t *testing.T, h *harness, clock *testClock, ctl *upstreamControl) {
	ctx := context.Background()
	eachTransientFailure(t, ctl, func(t *testing.T, mode string) {
		body := chatBody("if error " + mode)
		first := send(ctx, h.gws[0].URL, ifErrorKey, body)
		if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
			t.Fatalf("first: %d %s", first.status, first.header.Get("X-Corral-Cache"))
		}
		clock.Advance(time.Hour + 2*time.Minute)
		ctl.set(mode)
		before := ctl.calls.Load()
		for i, a := range burst(h.bases(), 9, ifErrorKey, body) {
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
				t.Fatalf("answer %d: %d %s %q; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			if cs := a.header.Get("Cache-Status"); cs != "corral; hit; fwd=stale; ttl=-120" {
				t.Errorf("answer %d Cache-Status = %q; want corral; hit; fwd=stale; ttl=-120", i, cs)
			}
		}
		if n := ctl.calls.Load() - before; n < 1 {
			t.Errorf("upstream calls = %d; want the requests to have gone upstream", n)
		}
		waitFlights(t, h)
		// Past stale_if_error: the failure.
		clock.Advance(time.Hour)
		a := send(ctx, h.gws[len(h.gws)-1].URL, ifErrorKey, body)
		if a.status == 200 || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("past stale_if_error: %d %s; want the failure", a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	})
	t.Run("404", func(t *testing.T) {
		ctl.set("")
		body := chatBody("if error 404")
		prime(t, h.gws[0].URL, ifErrorKey, body)
		clock.Advance(time.Hour + 2*time.Minute)
		ctl.set("404")
		a := send(ctx, h.gws[len(h.gws)-1].URL, ifErrorKey, body)
		if a.status != http.StatusNotFound || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("404 within stale_if_error: %d %s; want the 404", a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	})
}

func TestStaleIfError(t *testing.T) { inBothModes(t, ifErrorTenant, testIfError) }

// TestStaleIfErrorNoCache: a no-cache request never gets the stale entry
// instead of a failure.
func TestStaleIfErrorNoCache(t *testing.T) {
	h, clock, ctl := ifErrorHarness(t, 1, false)
	ctx := context.Background()
	body := chatBody("no-cache fails")
	prime(t, h.gw.URL, ifErrorKey, body)
	clock.Advance(time.Hour + 2*time.Minute)
	ctl.set("500")
	if a := send(ctx, h.gw.URL, ifErrorKey, body, "Cache-Control", "no-cache"); a.status != http.StatusInternalServerError {
		t.Errorf("no-cache: %d %s; want the 500", a.status, a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleStreamsEveryAPI: a streaming request for a stale entry gets it
// replayed as that API's event stream (Responses, Messages, legacy
// completions), and a streaming request in the stale_if_error window
// whose upstream fails before streaming gets the old entry as a stream.
func TestStaleStreamsEveryAPI(t *testing.T) {
	clock, ctl := newTestClock(), &upstreamControl{}
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{staleTenant, ifErrorTenant}
		o.wrapUpstream = ctl.wrap
		o.server = func(so *Options) {
			mem := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
			t.Cleanup(func() { _ = mem.Close() })
			so.Cache, so.Now = mem, clock.Now
		}
	})
	ctx := context.Background()
	apis := []struct {
		name, path, body, end string
		post                  func(ctx context.Context, url, key, body string, hdr ...string) answer
	}{
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"stale responses"%s}`, "response.completed", func(ctx context.Context, url, key, body string, _ ...string) answer {
			return sendTo(ctx, url, key, body)
		}},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"stale messages"}]%s}`, "message_stop", postMessages},
		{"completions", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"stale completions"%s}`, "data: [DONE]", func(ctx context.Context, url, key, body string, _ ...string) answer {
			return sendTo(ctx, url, key, body)
		}},
	}
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			url := h.gw.URL + api.path
			plain, stream := fmt.Sprintf(api.body, ""), fmt.Sprintf(api.body, `,"stream":true`)
			if a := api.post(ctx, url, staleKey, plain); a.status != 200 {
				t.Fatalf("first: %d %s", a.status, a.body)
			}
			clock.Advance(time.Hour + time.Second)
			a := api.post(ctx, url, staleKey, stream)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale ||
				!strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") || !strings.Contains(a.body, api.end) {
				t.Errorf("stream: %d %s %s %q; want a STALE event stream ending with %s", a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Content-Type"), a.body, api.end)
			}
			waitFlights(t, h)
		})
	}
	t.Run("if-error", func(t *testing.T) {
		ctl.set("")
		prime(t, h.gw.URL, ifErrorKey, chatBody("stream if error"))
		clock.Advance(time.Hour + 2*time.Minute)
		ctl.set("500")
		a := send(ctx, h.gw.URL, ifErrorKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"stream if error"}]}`)
		if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || !strings.Contains(a.body, "data: [DONE]") {
			t.Errorf("stream in stale_if_error: %d %s %q; want a STALE event stream", a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	})
}

// prompt and completion are the usage an answer's JSON body reports.
func (a answer) prompt() int     { return a.usage().PromptTokens }
func (a answer) completion() int { return a.usage().CompletionTokens }

func (a answer) usage() (u struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}) {
	var v struct {
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal([]byte(a.body), &v) == nil && v.Usage != nil {
		u.PromptTokens, u.CompletionTokens = v.Usage.PromptTokens, v.Usage.CompletionTokens
	}
	return u
}
