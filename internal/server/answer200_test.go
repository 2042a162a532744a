package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// errorOn200 answers every call whose body names "err200" with a 200
// whose body is not the API's answer (an error object, in the path's
// API's shape, or a body of the wrong kind), counting them.
func errorOn200(calls *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if !strings.Contains(string(b), "err200") {
				next.ServeHTTP(w, r)
				return
			}
			calls.Add(1)
			w.Header().Set("Content-Type", "application/json")
			switch {
			case strings.Contains(string(b), "wrong object"):
				_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion.chunk","choices":[],"data":null}`)
			case r.URL.Path == "/v1/messages":
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
			default:
				_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)
			}
		})
	}
}

// TestOK200ThatIsNoAnswerIsNotStored: a 200 whose body is not its API's
// success object (an error object, another object) is passed through and
// never stored, on every cached API: the same request twice makes two
// upstream calls and gets the body both times, never a HIT.
func TestOK200ThatIsNoAnswerIsNotStored(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.wrapUpstream = errorOn200(&calls) })
	ctx := context.Background()
	tests := []struct {
		name, path, body string
	}{
		{"chat", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"err200"}]}`},
		{"chat, another object", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"err200 wrong object"}]}`},
		{"completions", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"err200"}`},
		{"embeddings", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"err200"}`},
		{"embeddings, another object", "/v1/embeddings", `{"model":"text-embedding-3-small","input":"err200 wrong object","encoding_format":"x"}`},
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"err200"}`},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"err200"}]}`},
	}
	for _, tt := range tests {
		before := calls.Load()
		for i := range 2 {
			hdr := []string{"Authorization", "Bearer " + acmeKey}
			if strings.HasPrefix(tt.path, "/v1/messages") {
				hdr = append(hdr, "anthropic-version", "2023-06-01") // an OpenAI path with it is Anthropic's API, not served
			}
			a := sendWith(ctx, h.gw.URL+tt.path, tt.body, hdr...)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss || strings.Contains(a.header.Get("Cache-Status"), "stored") {
				t.Errorf("%s, request %d: %d %s %q %s", tt.name, i, a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Cache-Status"), a.body)
			}
		}
		if n := calls.Load() - before; n != 2 {
			t.Errorf("%s: %d upstream calls for two requests; want 2 (nothing stored)", tt.name, n)
		}
	}
}

// TestStaleRefreshGettingNoAnswerKeepsTheEntry: a stale_while_revalidate
// refresh that gets a 200 {"error":...} does not replace the good entry,
// which keeps serving within the window.
func TestStaleRefreshGettingNoAnswerKeepsTheEntry(t *testing.T) {
	inBothModes(t, staleTenant, func(t *testing.T, h *harness, clock *testClock, ctl *upstreamControl) {
		ctx := context.Background()
		body := chatBody("refreshed into an error")
		first := send(ctx, h.gws[0].URL, staleKey, body)
		if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
			t.Fatalf("first: %d %s", first.status, first.header.Get("X-Corral-Cache"))
		}
		clock.Advance(time.Hour + 30*time.Second)
		ctl.set("error200")
		if a := send(ctx, h.gws[0].URL, staleKey, body); a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
			t.Fatalf("stale: %s %q", a.header.Get("X-Corral-Cache"), a.body)
		}
		waitFlights(t, h)
		if n := ctl.calls.Load(); n != 2 {
			t.Fatalf("upstream calls = %d; want the miss and one refresh", n)
		}
		clock.Advance(2 * time.Minute) // past the refresh backoff, still in the window
		for _, base := range h.bases() {
			a := send(ctx, base, staleKey, body)
			if a.status != 200 || a.body != first.body || a.header.Get("X-Corral-Cache") != cacheStale {
				t.Errorf("%s after the refresh: %d %s %q; want STALE with the good entry", base, a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
		}
		waitFlights(t, h)
	})
}
