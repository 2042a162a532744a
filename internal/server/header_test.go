package server

import (
	"context"
	"net/http"
	"testing"
)

// The keys the hit path reads with header() or straight from the map
// must be canonical, or the lookups would miss what net/http parsed.
func TestHitPathHeaderKeysAreCanonical(t *testing.T) {
	for _, k := range []string{"Authorization", "X-Api-Key", "Api-Key", "Anthropic-Version", "Anthropic-Beta",
		"Openai-Beta", "Accept", "X-Corral-Cache-Ttl", "Cache-Control", "Content-Type", "Content-Encoding",
		requestIDHeader, "Retry-After"} {
		if c := http.CanonicalHeaderKey(k); c != k {
			t.Errorf("%q is not canonical (%q)", k, c)
		}
	}
}

func TestUpstreamRequestIDNeverReplacesCorrals(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "req_upstream_123")
				next.ServeHTTP(w, r)
			})
		}
	})
	for _, body := range []string{chatBody("rid"), `{"model":"gpt-4o-mini","stream":true,"messages":[]}`, `{"model":"mock-500"}`} {
		a := send(context.Background(), h.gw.URL, acmeKey, body, "X-Request-Id", "client-abc")
		if got := a.header.Get("X-Request-Id"); got != "client-abc" {
			t.Errorf("X-Request-Id = %q; want the client's", got)
		}
	}
}
