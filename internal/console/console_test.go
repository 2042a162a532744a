package console

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeBackend answers the console from fixed data; changes are recorded.
type fakeBackend struct {
	tenants   []Tenant
	usage     Usage
	changes   []string
	allDays   atomic.Int64 // UsageDays calls
	upstreams []Upstream
}

var _ Backend = (*fakeBackend)(nil)

func (f *fakeBackend) Tenants(context.Context) []Tenant { return f.tenants }
func (f *fakeBackend) Tenant(_ context.Context, id string) (Tenant, error) {
	for _, t := range f.tenants {
		if t.ID == id {
			return t, nil
		}
	}
	return Tenant{}, &Error{Status: http.StatusNotFound, Code: "not_found", Message: "No tenant with id " + id + "."}
}
func (f *fakeBackend) CreateTenant(_ context.Context, _, id string, _ []byte) error {
	f.changes = append(f.changes, "create "+id)
	return nil
}
func (f *fakeBackend) PatchTenant(_ context.Context, _, id string, _ []byte) error {
	f.changes = append(f.changes, "patch "+id)
	return nil
}
func (f *fakeBackend) DeleteTenant(_ context.Context, _, id string) error {
	f.changes = append(f.changes, "delete "+id)
	return nil
}
func (f *fakeBackend) Keys(context.Context, string) ([]Key, error) {
	return []Key{{ID: "key_1", Name: `<img src=x onerror=alert(1)>`, Prefix: "sk-corral-ab", CreatedAt: time.Unix(0, 0)}}, nil
}
func (f *fakeBackend) CreateKey(_ context.Context, _, id, name string) (NewKey, error) {
	f.changes = append(f.changes, "key "+id)
	return NewKey{ID: "key_2", Key: "sk-corral-secret", Name: name}, nil
}
func (f *fakeBackend) RevokeKey(_ context.Context, _, id, keyID string) error {
	f.changes = append(f.changes, "revoke "+keyID)
	return nil
}
func (f *fakeBackend) Purge(context.Context, string) (int, error)   { return 0, nil }
func (f *fakeBackend) Usage(context.Context, string) (Usage, error) { return f.usage, nil }
func (f *fakeBackend) UsageDays(context.Context, time.Time, time.Time) ([]DayRow, error) {
	f.allDays.Add(1)
	return nil, nil
}
func (f *fakeBackend) TenantDays(context.Context, string, time.Time, time.Time) ([]DayRow, error) {
	return nil, nil
}
func (f *fakeBackend) Audit(context.Context, int) ([]AuditEvent, error) { return nil, nil }
func (f *fakeBackend) Upstreams() []Upstream                            { return f.upstreams }
func (f *fakeBackend) FlightsInProgress() int                           { return 0 }
func (f *fakeBackend) LastHour() ([]string, []Minute)                   { return []string{"HIT"}, nil }

func newTestConsole(t *testing.T) (*httptest.Server, *fakeBackend) {
	t.Helper()
	fb := &fakeBackend{
		tenants: []Tenant{{ID: "acme", Source: "api", Policy: []byte(`{}`), MaxLeaders: 8, Cache: true}},
		usage:   Usage{Requests: 1234, Hits: 1000, ByModel: map[string]ModelUsage{`<script>alert(1)</script>`: {Requests: 1}}},
	}
	c, err := New(Options{Backend: fb, AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(Prefix+"/", c)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv, fb
}

// signIn posts the token from the console's own origin and returns the
// session cookie.
func signIn(t *testing.T, base, token string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	for _, c := range resp.Cookies() {
		if c.Name == CookieName {
			return resp, c.Value
		}
	}
	return resp, ""
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func get(t *testing.T, base, path, cookie string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	return roundTrip(t, req)
}

// roundTrip sends req without following redirects and reads the answer.
func roundTrip(t *testing.T, req *http.Request) (int, http.Header, string) {
	t.Helper()
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestSessionCookie: a wrong token is 401 with the sign-in page; the right
// one sets an HttpOnly, SameSite=Strict cookie for /console/ and 12 h; a
// forged or tampered cookie is refused.
func TestSessionCookie(t *testing.T) {
	srv, _ := newTestConsole(t)
	resp, ck := signIn(t, srv.URL, "wrong")
	if resp.StatusCode != http.StatusUnauthorized || ck != "" {
		t.Fatalf("wrong token: %d, cookie %q; want 401 and none", resp.StatusCode, ck)
	}
	resp, ck = signIn(t, srv.URL, "tok")
	if resp.StatusCode != http.StatusSeeOther || ck == "" {
		t.Fatalf("right token: %d, cookie %q", resp.StatusCode, ck)
	}
	sc := resp.Header.Get("Set-Cookie")
	for _, want := range []string{"HttpOnly", "SameSite=Strict", "Path=/console/", "Max-Age=43200"} {
		if !strings.Contains(sc, want) {
			t.Errorf("Set-Cookie %q lacks %s", sc, want)
		}
	}
	if strings.Contains(sc, "Secure") {
		t.Errorf("Set-Cookie %q is Secure on plain HTTP without CORRAL_CONSOLE_SECURE_COOKIE", sc)
	}
	if code, _, _ := get(t, srv.URL, "/console/", ck); code != http.StatusOK {
		t.Errorf("overview with the cookie: %d", code)
	}
	tampered := ck[:len(ck)-2] + "AA"
	if tampered == ck {
		tampered = ck[:len(ck)-2] + "BB"
	}
	if code, h, _ := get(t, srv.URL, "/console/", tampered); code != http.StatusSeeOther || h.Get("Location") != "/console/login" {
		t.Errorf("tampered cookie: %d to %q; want 303 to the sign-in", code, h.Get("Location"))
	}
	// A cookie signed with another admin token (a rotation) is refused.
	other := sessions{key: sessionKey("rotated"), revoked: NewMemoryRevocations(nil), now: time.Now}
	v, _ := other.issue()
	if code, _, _ := get(t, srv.URL, "/console/", v); code != http.StatusSeeOther {
		t.Errorf("cookie of another token: %d; want 303", code)
	}
}

// TestCrossSitePostRefused: a POST with a valid cookie from another
// origin, or with neither Origin nor Referer, is 403 and changes nothing.
func TestCrossSitePostRefused(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	for _, tt := range []struct{ name, origin, referer string }{
		{"other origin", "http://evil.example", ""},
		{"other referer", "", "http://evil.example/page"},
		{"neither", "", ""},
	} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/tenants", strings.NewReader("id=evil"))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: CookieName, Value: ck})
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.referer != "" {
			req.Header.Set("Referer", tt.referer)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || resp.Header.Get("Content-Security-Policy") == "" {
			t.Errorf("%s: %d; want 403 with the console's headers", tt.name, resp.StatusCode)
		}
	}
	if len(fb.changes) != 0 {
		t.Errorf("changes made: %v", fb.changes)
	}
}

// TestPagesEscapeAndCarryHeaders: every page carries the security
// headers, and a key or model name a client chose is text.
func TestPagesEscapeAndCarryHeaders(t *testing.T) {
	srv, _ := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	for _, p := range []string{"/console/", "/console/live", "/console/tenants", "/console/tenants/acme", "/console/upstreams", "/console/audit", "/console/login", "/console/nope", "/console/assets/console.css"} {
		code, h, body := get(t, srv.URL, p, ck)
		if h.Get("Content-Security-Policy") == "" || h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s (%d): headers %v", p, code, h)
		}
		if strings.Contains(body, "<img src=x") || strings.Contains(body, "<script>alert") {
			t.Errorf("%s renders a client's string as markup", p)
		}
	}
	_, _, body := get(t, srv.URL, "/console/tenants/acme", ck)
	if !strings.Contains(body, "&lt;img src=x onerror=alert(1)&gt;") || !strings.Contains(body, "&lt;script&gt;alert(1)&lt;/script&gt;") {
		t.Error("the key and model names are not shown as escaped text")
	}
}

// TestDeleteNeedsConfirmation: a delete without its box ticked is 400 and
// changes nothing; with it the tenant is deleted.
func TestDeleteNeedsConfirmation(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	post := func(body string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/tenants/acme/delete", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: ck})
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := post(""); code != http.StatusBadRequest || len(fb.changes) != 0 {
		t.Errorf("unconfirmed delete: %d, changes %v; want 400 and none", code, fb.changes)
	}
	if code := post("confirm=yes"); code != http.StatusOK || len(fb.changes) != 1 || fb.changes[0] != "delete acme" {
		t.Errorf("confirmed delete: %d, changes %v; want 200 and the delete", code, fb.changes)
	}
}

// TestSignOutRevokes: after sign-out the same cookie is refused, and the
// revocation is kept only until the session would have expired.
func TestSignOutRevokes(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	rev := NewMemoryRevocations(clock)
	s := sessions{key: sessionKey("tok"), revoked: rev, now: clock}
	v, exp := s.issue()
	id, _, err := s.check(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	if err := rev.Revoke(context.Background(), id, exp); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.check(context.Background(), v); err == nil {
		t.Error("a revoked session still checks")
	}
	now = exp // the session has expired: its revocation may go
	if _, _, err := s.parse(v); err == nil {
		t.Error("an expired session still parses")
	}
	other, exp2 := s.issue()
	id2, _, _ := s.parse(other)
	_ = rev.Revoke(context.Background(), id2, exp2)
	if ok, _ := rev.Revoked(context.Background(), id); ok || len(rev.ids) != 1 {
		t.Errorf("expired revocations kept: %v", rev.ids)
	}
}

// TestSecureCookieBehindTLSProxy: with SecureCookie the cookie is Secure
// on plain HTTP, and the browser's https:// Origin (the proxy's TLS) is
// the console's own.
func TestSecureCookieBehindTLSProxy(t *testing.T) {
	fb := &fakeBackend{tenants: []Tenant{{ID: "acme", Source: "api"}}}
	c, err := New(Options{Backend: fb, AdminToken: "tok", SecureCookie: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/login", strings.NewReader("token=tok"))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://"+strings.ToUpper(host[:1])+host[1:])
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || !strings.Contains(resp.Header.Get("Set-Cookie"), "; Secure") {
		t.Errorf("sign-in behind TLS: %d, Set-Cookie %q; want 303 and a Secure cookie", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}
}
