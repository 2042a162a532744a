package console

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/clocktest"
)

// TestSignInLockout: after 5 wrong tokens from one address the sign-in is
// a 429 page with Retry-After and no session, the right token included,
// until the minute is over; then the right token signs in.
func TestSignInLockout(t *testing.T) {
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	c, err := New(Options{Backend: &fakeBackend{}, AdminToken: "tok", Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	for i := range 5 {
		if resp, _ := signIn(t, srv.URL, "guess"); resp.StatusCode != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d; want 401", i+1, resp.StatusCode)
		}
	}
	clock.Advance(20 * time.Second)
	resp, ck := signIn(t, srv.URL, "tok")
	if resp.StatusCode != http.StatusTooManyRequests || ck != "" || resp.Header.Get("Retry-After") != "40" {
		t.Errorf("the right token 20 s into the lock: %d, session set %v, Retry-After %q; want 429, none, 40", resp.StatusCode, ck != "", resp.Header.Get("Retry-After"))
	}
	for _, h := range []string{"Content-Security-Policy", "X-Frame-Options"} {
		if resp.Header.Get(h) == "" {
			t.Errorf("the 429 page lacks %s", h)
		}
	}
	clock.Advance(40 * time.Second)
	if resp, ck := signIn(t, srv.URL, "tok"); resp.StatusCode != http.StatusSeeOther || ck == "" {
		t.Errorf("the right token once the lock ended: %d, session set %v; want 303 and a session", resp.StatusCode, ck != "")
	}
}
