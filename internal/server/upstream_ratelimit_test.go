package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// throttledUpstream answers every call whose body or path names
// "throttled" with the 429 of a shared account, in the API's own shape,
// with the account's organisation, limits and usage in its body, and the
// headers that say when to retry.
func throttledUpstream(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(b))
		if !strings.Contains(string(b), "throttled") && !strings.Contains(r.URL.Path, "throttled") {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("Retry-After", "7")
		h.Set("Retry-After-Ms", "6500")
		h.Set("X-Should-Retry", "true")
		h.Set("X-Ratelimit-Limit-Tokens", "200000")
		w.WriteHeader(http.StatusTooManyRequests)
		if strings.HasPrefix(r.URL.Path, "/v1/messages") {
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"rate_limit_error","message":"This request would exceed the rate limit for your organization (org-abc) of 200000 input tokens per minute. Used 199500."}}`)
			return
		}
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-4o in organization org-abc on tokens per min (TPM): Limit 200000, Used 199500, Requested 900.","type":"tokens","param":null,"code":"rate_limit_exceeded"}}`)
	})
}

// TestUpstream429BodyIsCorrals: an upstream 429's body, which describes
// the shared account, never reaches a tenant on any path (cached, streamed
// before the first byte, bypassed, Responses, Messages, proxied): the
// client gets Corral's own 429 in its API's shape, with the upstream's
// Retry-After, retry-after-ms and x-should-retry.
func TestUpstream429BodyIsCorrals(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.wrapUpstream = throttledUpstream })
	ctx := context.Background()
	base := h.gw.URL
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"throttled"}]}`
	msgs := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"throttled"}]}`
	get := func(path string) answer {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+path, nil)
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return answer{err: err}
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return answer{status: resp.StatusCode, header: resp.Header, body: string(b), err: err}
	}
	tests := []struct {
		name      string
		give      answer
		anthropic bool
	}{
		{"chat", send(ctx, base, acmeKey, chat), false},
		{"chat again (nothing stored)", send(ctx, base, acmeKey, chat), false},
		{"chat stream", send(ctx, base, acmeKey, strings.Replace(chat, `"messages"`, `"stream":true,"messages"`, 1)), false},
		{"chat bypass", send(ctx, base, acmeKey, chat, "Cache-Control", "no-store"), false},
		{"responses", sendTo(ctx, base+"/v1/responses", acmeKey, `{"model":"gpt-4o-mini","input":"throttled","stream":true}`), false},
		{"messages", postMessages(ctx, base+"/v1/messages", acmeKey, msgs), true},
		{"messages stream", postMessages(ctx, base+"/v1/messages", acmeKey, strings.Replace(msgs, `"messages"`, `"stream":true,"messages"`, 1)), true},
		{"proxied", get("/v1/models/throttled"), false},
	}
	for _, tt := range tests {
		a := tt.give
		if a.err != nil || a.status != 429 {
			t.Errorf("%s: %v %d %s", tt.name, a.err, a.status, a.body)
			continue
		}
		for _, leak := range []string{"org-abc", "organization", "200000", "199500"} {
			if strings.Contains(a.body, leak) || strings.Contains(strings.ToLower(a.header.Get("X-Ratelimit-Limit-Tokens")), leak) {
				t.Errorf("%s: the answer carries %q: %s", tt.name, leak, a.body)
			}
		}
		if tt.anthropic {
			var e struct {
				Type  string `json:"type"`
				Error struct{ Type, Message string }
			}
			if json.Unmarshal([]byte(a.body), &e) != nil || e.Type != "error" || e.Error.Type != "rate_limit_error" || e.Error.Message == "" {
				t.Errorf("%s: not Anthropic's rate_limit_error: %s", tt.name, a.body)
			}
		} else {
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			if json.Unmarshal([]byte(a.body), &e) != nil || e.Error.Code != "rate_limit_exceeded" || e.Error.Message == "" {
				t.Errorf("%s: not OpenAI's rate_limit_exceeded: %s", tt.name, a.body)
			}
		}
		if a.header.Get("Retry-After") != "7" || a.header.Get("Retry-After-Ms") != "6500" || a.header.Get("X-Should-Retry") != "true" {
			t.Errorf("%s: Retry-After %q, retry-after-ms %q, x-should-retry %q; want the upstream's 7, 6500, true", tt.name,
				a.header.Get("Retry-After"), a.header.Get("Retry-After-Ms"), a.header.Get("X-Should-Retry"))
		}
	}
}
