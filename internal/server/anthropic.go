package server

import (
	"net/http"
	"strings"
	"time"
)

// isAnthropicPath reports a path of Anthropic's Messages API.
func isAnthropicPath(p string) bool {
	return p == "/v1/messages" || strings.HasPrefix(p, "/v1/messages/")
}

// isAnthropicModels reports GET /v1/models from an Anthropic client (it
// sends anthropic-version), answered in Anthropic's shape.
func isAnthropicModels(r *http.Request) bool {
	return r.URL.Path == "/v1/models" && header(r.Header, "Anthropic-Version") != ""
}

// anthropicRateHeaders renames Corral's rate-limit headers the way
// Anthropic's API names them, so its SDKs read them as they read
// Anthropic's own: x-ratelimit-limit-requests becomes
// anthropic-ratelimit-requests-limit, and a reset duration ("6m0s")
// becomes the RFC 3339 time it ends at. Retry-After stays as it is.
func anthropicRateHeaders(h http.Header, now time.Time) {
	for _, kind := range []string{"requests", "tokens"} {
		for _, field := range []string{"limit", "remaining", "reset"} {
			from := "X-Ratelimit-" + strings.ToUpper(field[:1]) + field[1:] + "-" + strings.ToUpper(kind[:1]) + kind[1:]
			v := h.Get(from)
			if v == "" {
				continue
			}
			h.Del(from)
			if field == "reset" {
				d, err := time.ParseDuration(v)
				if err != nil {
					continue
				}
				v = now.Add(d).UTC().Format(time.RFC3339)
			}
			h.Set("anthropic-ratelimit-"+kind+"-"+field, v)
		}
	}
}
