package console

import (
	"strings"
	"testing"
)

// TestUpstreamsShowTheirProvider: the Upstreams page has a Provider column
// and each upstream's row names who runs it beside its API.
func TestUpstreamsShowTheirProvider(t *testing.T) {
	srv, fb := newTestConsole(t)
	fb.upstreams = []Upstream{
		{Name: "claude", API: "anthropic", Provider: "anthropic", State: "closed"},
		{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", State: "open"},
		{Name: "azure-east", API: "openai", Provider: "azure", State: "closed"},
	}
	_, ck := signIn(t, srv.URL, "tok")
	code, _, body := get(t, srv.URL, "/console/upstreams", ck)
	if code != 200 {
		t.Fatalf("upstreams page: %d", code)
	}
	if !strings.Contains(body, `<th scope="col">API</th><th scope="col">Provider</th>`) {
		t.Error("no Provider column after API")
	}
	for _, u := range fb.upstreams {
		want := `<tr data-upstream="` + u.Name + `"><td>` + u.Name + `</td><td>` + u.API + `</td><td data-field="provider">` + u.Provider + `</td>`
		if !strings.Contains(body, want) {
			t.Errorf("no row %s", want)
		}
	}
}
