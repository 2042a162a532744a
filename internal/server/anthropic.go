package server

import (
	"net/http"
	"strings"
	"time"
)

// isAnthropicPath reports a path of Anthropic's Messages API (a path
// parameter after "messages" included: it is refused in Anthropic's shape).
func isAnthropicPath(p string) bool {
	rest, ok := strings.CutPrefix(p, "/v1/messages")
	return ok && (rest == "" || rest[0] == '/' || rest[0] == ';')
}

// apiOfRequest is the API a request speaks, which decides the upstreams
// it goes to and the shape of Corral's answers: Anthropic's for a path of
// its Messages API and for any /v1 request that carries anthropic-version
// (Anthropic's SDKs and agents always send it; OpenAI's never do), OpenAI's
// for everything else.
func apiOfRequest(r *http.Request) string {
	p := r.URL.Path
	if isAnthropicPath(p) || (strings.HasPrefix(p, "/v1/") && header(r.Header, "Anthropic-Version") != "") {
		return apiAnthropic
	}
	return apiOpenAI
}

// anthropicPaths are the first path segments below /v1 of the parts of
// Anthropic's API Corral serves: Messages (with Message Batches and
// count_tokens), Models and Files. Anything else a client of Anthropic's
// API asks for (its admin API, skills, ...) is not forwarded: Corral keeps
// no ownership records for it, and its objects on the shared account would
// be every tenant's.
var anthropicPaths = []string{"messages", "models", "files"}

// anthropicServes reports whether rel, a path below /v1, is one of the
// parts of Anthropic's API Corral serves (matched in any letter case, as
// object paths are).
func anthropicServes(rel string) bool {
	seg, _, _ := strings.Cut(strings.TrimPrefix(rel, "/"), "/")
	for _, p := range anthropicPaths {
		if strings.EqualFold(seg, p) {
			return true
		}
	}
	return false
}

var errNoAnthropicEndpoint = clientError(http.StatusNotFound, "not_found",
	"Corral serves Anthropic's Messages, Message Batches, Models and Files APIs under /v1; this path is none of them.")

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
