package console

import (
	"bytes"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// postForm posts body from the console's own origin with the session
// cookie and returns the status and page.
func postForm(t *testing.T, base, path, cookie, contentType, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Origin", base)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
	}
	code, _, body := roundTrip(t, req)
	return code, body
}

// TestOversizedFormsChangeNothing: a form body over the limit is 413 with
// a message and nothing changed. (It used to be read as an empty form:
// the key was created unnamed.)
func TestOversizedFormsChangeNothing(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	huge := strings.Repeat("x", 1<<20)
	const form = "application/x-www-form-urlencoded"
	for _, tt := range []struct{ path, body string }{
		{"/console/tenants/acme/keys", "name=" + huge},
		{"/console/tenants", "id=big&policy=" + huge},
		{"/console/tenants/acme/policy", "patch=" + huge},
		{"/console/tenants/acme/delete", "confirm=yes&pad=" + huge},
		{"/console/tenants/acme/keys/key_1/revoke", "pad=" + huge},
	} {
		code, body := postForm(t, srv.URL, tt.path, ck, form, tt.body)
		if code != http.StatusRequestEntityTooLarge || !strings.Contains(body, "the form is too large. Nothing was changed.") {
			t.Errorf("POST %s with 1 MiB: %d; want 413 and the message", tt.path, code)
		}
	}
	if len(fb.changes) != 0 {
		t.Errorf("changes made by oversized forms: %v", fb.changes)
	}
	// The same as multipart/form-data, which ParseForm does not read.
	var mp bytes.Buffer
	mw := multipart.NewWriter(&mp)
	_ = mw.WriteField("name", huge)
	_ = mw.Close()
	if code, _ := postForm(t, srv.URL, "/console/tenants/acme/keys", ck, mw.FormDataContentType(), mp.String()); code != http.StatusRequestEntityTooLarge {
		t.Errorf("multipart create-key with 1 MiB: %d; want 413", code)
	}
	if len(fb.changes) != 0 {
		t.Errorf("changes made by an oversized multipart form: %v", fb.changes)
	}
	// A sign-in with a huge body is refused too, and sets no cookie.
	code, _ := postForm(t, srv.URL, "/console/login", "", form, "token="+huge)
	if code != http.StatusRequestEntityTooLarge {
		t.Errorf("sign-in with 1 MiB: %d; want 413", code)
	}
	// A malformed form body (a bad escape) is 400, nothing changed.
	if code, _ := postForm(t, srv.URL, "/console/tenants/acme/keys", ck, form, "name=%zz"); code != http.StatusBadRequest || len(fb.changes) != 0 {
		t.Errorf("malformed form: %d, changes %v; want 400 and none", code, fb.changes)
	}
}

// TestOriginTricks: a change is accepted only from the console's exact
// origin (scheme, host in any case, port); "null", look-alike hosts,
// other ports, userinfo and a text/plain body from another site are
// refused and change nothing. With SecureCookie (TLS at a proxy) only the
// https origin is the console's.
func TestOriginTricks(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	host := strings.TrimPrefix(srv.URL, "http://")
	hostname, port, _ := strings.Cut(host, ":")
	post := func(origin, referer, ctype string) int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/console/tenants/acme/keys", strings.NewReader("name=x"))
		req.Header.Set("Content-Type", ctype)
		req.AddCookie(&http.Cookie{Name: CookieName, Value: ck})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	const form = "application/x-www-form-urlencoded"
	for _, tt := range []struct{ name, origin, referer, ctype string }{
		{"null origin", "null", "", form},
		{"null origin, own referer", "null", srv.URL + "/console/", form},
		{"another port", "http://" + hostname + ":1" + port, "", form},
		{"no port", "http://" + hostname, "", form},
		{"look-alike host", "http://" + host + ".evil.example", "", form},
		{"trailing path", srv.URL + "/", "", form},
		{"https when served plain", "https://" + host, "", form},
		{"referer with userinfo", "", "http://" + host + "@evil.example/", form},
		{"referer of another port", "", "http://" + hostname + ":1" + port + "/console/", form},
		{"text/plain from another site", "http://evil.example", "", "text/plain"},
	} {
		if code := post(tt.origin, tt.referer, tt.ctype); code != http.StatusForbidden {
			t.Errorf("%s: %d; want 403", tt.name, code)
		}
	}
	if len(fb.changes) != 0 {
		t.Fatalf("changes made: %v", fb.changes)
	}
	if code := post("HTTP://"+strings.ToUpper(host), "", form); code != http.StatusCreated {
		t.Errorf("own origin in capitals: %d; want 201", code)
	}
	if code := post("", srv.URL+"/console/tenants/acme", form); code != http.StatusCreated {
		t.Errorf("own referer, no origin: %d; want 201", code)
	}

	// Behind a TLS proxy: https is the console's origin, plain http is not.
	c, err := New(Options{Backend: fb, AdminToken: "tok", SecureCookie: true})
	if err != nil {
		t.Fatal(err)
	}
	tls := httptest.NewServer(c)
	t.Cleanup(tls.Close)
	for origin, want := range map[string]int{"http://" + strings.TrimPrefix(tls.URL, "http://"): http.StatusForbidden, "https://" + strings.TrimPrefix(tls.URL, "http://"): http.StatusSeeOther} {
		req, _ := http.NewRequest(http.MethodPost, tls.URL+"/console/login", strings.NewReader("token=tok"))
		req.Header.Set("Content-Type", form)
		req.Header.Set("Origin", origin)
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("SecureCookie, sign-in from %s: %d; want %d", origin, resp.StatusCode, want)
		}
	}
}

// TestHeadersOnEveryResponse: redirects, refusals, 405s, 413s and the
// signed-out answers carry the CSP and X-Frame-Options too, not only the
// pages.
func TestHeadersOnEveryResponse(t *testing.T) {
	srv, _ := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	check := func(what string, resp *http.Response) {
		t.Helper()
		resp.Body.Close()
		h := resp.Header
		if h.Get("Content-Security-Policy") != "default-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'" ||
			h.Get("X-Frame-Options") != "DENY" || h.Get("Cache-Control") == "" {
			t.Errorf("%s (%d): headers %v", what, resp.StatusCode, h)
		}
	}
	do := func(method, path, cookie, origin, body string) *http.Response {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if cookie != "" {
			req.AddCookie(&http.Cookie{Name: CookieName, Value: cookie})
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	check("signed-out redirect", do(http.MethodGet, "/console/", "", "", ""))
	check("signed-out live 401", do(http.MethodGet, "/console/live", "", "", ""))
	check("405", do(http.MethodPut, "/console/tenants", ck, srv.URL, ""))
	check("403 cross-site", do(http.MethodPost, "/console/tenants", ck, "http://evil.example", "id=x"))
	check("413", do(http.MethodPost, "/console/tenants", ck, srv.URL, "id="+strings.Repeat("x", 1<<17)))
	check("303 after a change", do(http.MethodPost, "/console/tenants/acme/purge", ck, srv.URL, ""))
	check("asset directory", do(http.MethodGet, "/console/assets/", "", "", ""))
	check("unknown tenant 404", do(http.MethodGet, "/console/tenants/nope", ck, "", ""))
}

// TestTokenOnlyInBody: the admin token signs in only from the form body,
// never from the URL (where history, logs and Referer would keep it),
// and no page echoes it.
func TestTokenOnlyInBody(t *testing.T) {
	srv, _ := newTestConsole(t)
	code, body := postForm(t, srv.URL, "/console/login?token=tok", "", "application/x-www-form-urlencoded", "")
	if code != http.StatusUnauthorized || strings.Contains(body, "tok\"") {
		t.Errorf("sign-in with the token in the URL: %d; want 401", code)
	}
	if code, _, _ := get(t, srv.URL, "/console/login?token=tok", ""); code != http.StatusOK {
		t.Errorf("GET sign-in page: %d", code)
	}
	code, body = postForm(t, srv.URL, "/console/login", "", "application/x-www-form-urlencoded", "token=tok-wrong-guess")
	if code != http.StatusUnauthorized || strings.Contains(body, "tok-wrong-guess") {
		t.Errorf("wrong token: %d, echoed %v; want 401 and not echoed", code, strings.Contains(body, "tok-wrong-guess"))
	}
}

// TestGetChangesNothing: no GET changes anything, even on a change's own
// path (a link or an image another site plants): those are 405.
func TestGetChangesNothing(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	for _, p := range []string{"/console/logout", "/console/tenants/acme/delete?confirm=yes", "/console/tenants/acme/keys?name=x",
		"/console/tenants/acme/keys/key_1/revoke", "/console/tenants/acme/purge", "/console/tenants/acme/policy?patch=%7B%7D"} {
		if code, _, _ := get(t, srv.URL, p, ck); code != http.StatusMethodNotAllowed {
			t.Errorf("GET %s: %d; want 405", p, code)
		}
	}
	for _, p := range []string{"/console/", "/console/live", "/console/tenants", "/console/tenants/acme?done=created", "/console/upstreams", "/console/audit"} {
		if code, _, _ := get(t, srv.URL, p, ck); code != http.StatusOK {
			t.Errorf("GET %s: %d; want 200", p, code)
		}
	}
	if len(fb.changes) != 0 {
		t.Errorf("GETs changed: %v", fb.changes)
	}
	if code, _, _ := get(t, srv.URL, "/console/", ck); code != http.StatusOK {
		t.Error("GET /console/logout ended the session")
	}
}
