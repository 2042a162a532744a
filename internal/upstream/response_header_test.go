package upstream

import (
	"net/http"
	"testing"
)

// TestResponseHeadersNameNoUpstreamAccount: the headers that name Corral's
// upstream account (OpenAI's organization and project, Anthropic's
// organization id) never reach a client.
func TestResponseHeadersNameNoUpstreamAccount(t *testing.T) {
	src := http.Header{}
	for _, k := range []string{"Openai-Organization", "Openai-Project", "Anthropic-Organization-Id"} {
		src.Set(k, "corral-account")
	}
	src.Set("Content-Type", "application/json")
	dst := http.Header{}
	CopyResponseHeader(dst, src)
	for k := range dst {
		if k != "Content-Type" {
			t.Errorf("%s reached the client", k)
		}
	}
}
