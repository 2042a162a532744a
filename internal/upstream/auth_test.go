package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAuthStyles checks each way Corral sends its own key, that extra
// headers go along, and that no credential a tenant sent in any style
// reaches the upstream.
func TestAuthStyles(t *testing.T) {
	tests := []struct {
		auth       string
		wantHeader string
		wantValue  string
	}{
		{"", "Authorization", "Bearer sk-up"},
		{"bearer", "Authorization", "Bearer sk-up"},
		{"api-key", "Api-Key", "sk-up"},
		{"x-api-key", "X-Api-Key", "sk-up"},
	}
	for _, tt := range tests {
		got := make(chan http.Header, 1)
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got <- r.Header.Clone()
		}))
		c, err := New(Options{BaseURL: up.URL + "/v1", APIKey: "sk-up", Auth: tt.auth, Headers: map[string]string{"OpenAI-Project": "proj_x"}})
		if err != nil {
			t.Fatal(err)
		}
		client := http.Header{}
		client.Set("Authorization", "Bearer sk-tenant")
		client.Set("Api-Key", "sk-tenant")
		client.Set("X-Api-Key", "sk-tenant")
		client.Set("OpenAI-Project", "tenant-project")
		resp, err := c.Do(context.Background(), Request{Method: "GET", Path: "/models", Header: client})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		h := <-got
		up.Close()
		if h.Get(tt.wantHeader) != tt.wantValue {
			t.Errorf("auth %q: %s = %q; want %q", tt.auth, tt.wantHeader, h.Get(tt.wantHeader), tt.wantValue)
		}
		for _, k := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
			for _, v := range h.Values(k) {
				if v == "sk-tenant" || v == "Bearer sk-tenant" {
					t.Errorf("auth %q: the tenant's key went upstream in %s", tt.auth, k)
				}
			}
		}
		if h.Get("Openai-Project") != "proj_x" {
			t.Errorf("auth %q: OpenAI-Project = %q; want the configured proj_x", tt.auth, h.Get("Openai-Project"))
		}
	}
	if _, err := New(Options{BaseURL: "http://x/v1", Auth: "basic"}); err == nil {
		t.Error("an unknown auth style was accepted")
	}
}
