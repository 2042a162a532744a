package console

import (
	"io"
	"net/http"
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
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
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
