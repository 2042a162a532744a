package server

import (
	"net/http"
	"testing"
)

// TestConsoleOnlyWithAdminToken: without an admin token /console/ is the
// 404 of any unknown path and / is too; with one the console answers
// (its sign-in first) and / redirects to it.
func TestConsoleOnlyWithAdminToken(t *testing.T) {
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	get := func(base, path string) *http.Response {
		t.Helper()
		resp, err := noRedirect.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	off := newHarness(t).bases()[0]
	for _, p := range []string{"/console/", "/console/login", "/console/assets/console.css", "/"} {
		if resp := get(off, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("without an admin token GET %s = %d; want 404", p, resp.StatusCode)
		}
	}
	on := newHarness(t, withAdmin).bases()[0]
	if resp := get(on, "/"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET / = %d to %q; want 302 to /console/", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get(on, "/console/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Errorf("GET /console/ signed out = %d to %q; want 303 to the sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get(on, "/console/login"); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET /console/login = %d, X-Frame-Options %q", resp.StatusCode, resp.Header.Get("X-Frame-Options"))
	}
}
