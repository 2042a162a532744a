package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/usage"
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
	for _, p := range []string{"/console", "/console/", "/console/login", "/console/live", "/console/assets/console.css", "/console/assets/", "/"} {
		if resp := get(off, p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("without an admin token GET %s = %d; want 404", p, resp.StatusCode)
		}
	}
	on := newHarness(t, withAdmin).bases()[0]
	if resp := get(on, "/"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" ||
		resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET / = %d to %q, headers %v; want 302 to /console/ with the console's CSP and X-Frame-Options", resp.StatusCode, resp.Header.Get("Location"), resp.Header)
	}
	if resp := get(on, "/console"); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET /console = %d to %q, headers %v; want 302 to /console/ with the console's headers", resp.StatusCode, resp.Header.Get("Location"), resp.Header)
	}
	if resp := get(on, "/console/"); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Errorf("GET /console/ signed out = %d to %q; want 303 to the sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp := get(on, "/console/login"); resp.StatusCode != http.StatusOK || resp.Header.Get("X-Frame-Options") != "DENY" {
		t.Errorf("GET /console/login = %d, X-Frame-Options %q", resp.StatusCode, resp.Header.Get("X-Frame-Options"))
	}
}

// failingUsage is a usage store that cannot be read (Redis away).
type failingUsage struct{ UsageRecorder }

func (failingUsage) Get(context.Context, string) (usage.Counters, error) {
	return usage.Counters{}, errors.New("usage store unreachable")
}

func (failingUsage) Days(context.Context, []string, time.Time, time.Time) ([]usage.DayRow, error) {
	return nil, errors.New("usage store unreachable")
}

// TestConsoleUsageUnreadable: with the usage store unreadable the
// Overview and the Tenants page (which read every tenant's usage at once)
// still answer 200, saying which figures are missing. Run under -race:
// the reads run concurrently and must not share the request's log record.
func TestConsoleUsageUnreadable(t *testing.T) {
	h := newHarness(t, withAdmin, withServer(func(so *Options) { so.Usage = failingUsage{usage.NewMemory()} }))
	base := h.bases()[0]
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	req, _ := http.NewRequest(http.MethodPost, base+"/console/login", strings.NewReader(url.Values{"token": {adminToken}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == console.CookieName {
			ck = c
		}
	}
	if ck == nil {
		t.Fatalf("sign-in: %d, no cookie", resp.StatusCode)
	}
	for _, p := range []string{"/console/", "/console/live", "/console/tenants"} {
		req, _ := http.NewRequest(http.MethodGet, base+p, nil)
		req.AddCookie(ck)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s = %d; want 200", p, resp.StatusCode)
		}
		if p != "/console/tenants" && !strings.Contains(string(b), "Unavailable now: acme, limited") {
			t.Errorf("GET %s does not name the tenants whose usage is missing", p)
		}
		if p == "/console/tenants" && strings.Count(string(b), "usage unavailable") != 2 {
			t.Errorf("GET %s does not mark both tenants' usage unavailable", p)
		}
	}
}

// TestOneObject: an admin body or a console policy is one JSON object and
// nothing else; a stray closing bracket after it (which Decoder.More
// let through) is refused.
func TestOneObject(t *testing.T) {
	for doc, want := range map[string]bool{
		`{}`: true, ` {"requests_per_minute": 5} `: true, "{\"a\":1}\n": true,
		`{}}`: false, `{"requests_per_minute": 5}]`: false, `{} {}`: false, `{} x`: false,
		`null`: false, `[]`: false, `"x"`: false, `{`: false, ``: false,
	} {
		if _, ok := oneObject([]byte(doc)); ok != want {
			t.Errorf("oneObject(%q) = %v; want %v", doc, ok, want)
		}
		if _, aerr := policyFields([]byte(doc)); (aerr == nil) != want {
			t.Errorf("policyFields(%q) refused = %v; want %v", doc, aerr != nil, !want)
		}
	}
}
