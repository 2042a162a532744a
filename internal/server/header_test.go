package server

import (
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
