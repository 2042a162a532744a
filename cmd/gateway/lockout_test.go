package main

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
)

// Wrong admin tokens, end to end: real gateway processes, a real
// redis-server, and clients dialling from distinct loopback addresses
// (127.0.0.2, 127.0.0.3...), which the gateways see as distinct TCP peers.

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip, following no redirects.
func clientFrom(t *testing.T, ip string) *http.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}}
	tr := &http.Transport{DialContext: d.DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// tokenAnswer is one attempt's answer.
type tokenAnswer struct {
	status int
	header http.Header
	body   string
}

func send(t *testing.T, c *http.Client, req *http.Request) tokenAnswer {
	t.Helper()
	resp, body := doWith(t, c, req)
	return tokenAnswer{resp.StatusCode, resp.Header, body}
}

// bearerAt sends GET base+path with the admin bearer token.
func bearerAt(t *testing.T, c *http.Client, base, path, token string) tokenAnswer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	return send(t, c, req)
}

// signInAt posts token to the console's sign-in, from its own origin.
func signInAt(t *testing.T, c *http.Client, base, token string) tokenAnswer {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/console/login", strings.NewReader(url.Values{"token": {token}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	return send(t, c, req)
}

// wantAdmin429 checks a /admin or /metrics refusal: 429 in OpenAI's
// error shape, code too_many_attempts, saying when to retry (within the
// minute's lock, in seconds and milliseconds).
func wantAdmin429(t *testing.T, what string, a tokenAnswer) {
	t.Helper()
	var body struct {
		Error struct{ Code, Type, Message string }
	}
	if a.status != http.StatusTooManyRequests || json.Unmarshal([]byte(a.body), &body) != nil || body.Error.Code != "too_many_attempts" {
		t.Errorf("%s: %d %.200s; want 429 too_many_attempts", what, a.status, a.body)
		return
	}
	s, err := strconv.Atoi(a.header.Get("Retry-After"))
	if err != nil || s < 1 || s > 60 {
		t.Errorf("%s: Retry-After %q; want 1..60 seconds", what, a.header.Get("Retry-After"))
	}
	ms, err := strconv.Atoi(a.header.Get("retry-after-ms"))
	if err != nil || ms < 1 || ms > 60_000 || (ms+999)/1000 != s {
		t.Errorf("%s: retry-after-ms %q with Retry-After %d; want the same wait in ms", what, a.header.Get("retry-after-ms"), s)
	}
}

// wantPage429 checks the console sign-in's refusal: a 429 page that says
// why and when to retry, and no session.
func wantPage429(t *testing.T, what string, a tokenAnswer) {
	t.Helper()
	if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, "Too many wrong tokens") || a.header.Get("Retry-After") == "" {
		t.Errorf("%s: %d (Retry-After %q); want the 429 sign-in page", what, a.status, a.header.Get("Retry-After"))
	}
	if ck := a.header.Get("Set-Cookie"); strings.Contains(ck, console.CookieName+"=") {
		t.Errorf("%s: a refused sign-in set a session: %q", what, ck)
	}
}

// wantSignedIn checks a sign-in that worked: a session and the Overview.
func wantSignedIn(t *testing.T, what string, a tokenAnswer) {
	t.Helper()
	if a.status != http.StatusSeeOther || !strings.Contains(a.header.Get("Set-Cookie"), console.CookieName+"=") {
		t.Errorf("%s: %d, Set-Cookie %q; want 303 with a session", what, a.status, a.header.Get("Set-Cookie"))
	}
}

// lockoutGateways starts n gateway processes with the admin token "adm"
// and the extra env (CORRAL_REDIS_URL for distributed mode).
func lockoutGateways(t *testing.T, n int, env ...string) []string {
	t.Helper()
	up := serveMock(t, mockllm.Options{})
	env = append([]string{"CORRAL_UPSTREAM_URL=" + up.URL + "/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR=" + t.TempDir()}, env...)
	bin := buildGateway(t)
	var bases []string
	for range n {
		base, _ := startGateway(t, bin, env)
		bases = append(bases, base)
	}
	return bases
}

// TestAdminTokenLockoutAcrossInstances: 5 wrong admin tokens from one
// address on instance A lock that address out on instance B too: the
// right token is then 429 on /admin, on /metrics and at the console's
// sign-in; another address is unaffected on both, right token and wrong
// alike, and its sign-ins reset nothing; the console's wrong sign-ins and
// /admin's wrong bearers add up, and a right token between them resets
// nothing either.
func TestAdminTokenLockoutAcrossInstances(t *testing.T) {
	rs := redistest.Start(t)
	bases := lockoutGateways(t, 2, "CORRAL_REDIS_URL="+rs.URL())
	a, b := bases[0], bases[1]
	guesser, other, mixed := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.1"), clientFrom(t, "127.0.0.3")

	for i := range 5 {
		if got := bearerAt(t, guesser, a, "/admin/tenants", "guess-"+strconv.Itoa(i)); got.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d on A: %d; want 401", i+1, got.status)
		}
	}
	wantAdmin429(t, "the right token on B after 5 wrong on A", bearerAt(t, guesser, b, "/admin/tenants", "adm"))
	wantAdmin429(t, "a 7th, wrong, on A", bearerAt(t, guesser, a, "/admin/tenants", "guess-7"))
	wantAdmin429(t, "/metrics with the right token on B", bearerAt(t, guesser, b, "/metrics", "adm"))
	wantPage429(t, "the console sign-in with the right token on B", signInAt(t, guesser, b, "adm"))

	for _, base := range bases {
		if got := bearerAt(t, other, base, "/admin/tenants", "adm"); got.status != http.StatusOK {
			t.Errorf("another address's right token on %s: %d; want 200", base, got.status)
		}
		if got := bearerAt(t, other, base, "/admin/tenants", "nope"); got.status != http.StatusUnauthorized {
			t.Errorf("another address's wrong token on %s: %d; want 401", base, got.status)
		}
		wantSignedIn(t, "another address's sign-in on "+base, signInAt(t, other, base, "adm"))
	}
	wantAdmin429(t, "the guesser after another address signed in", bearerAt(t, guesser, a, "/admin/tenants", "adm"))

	for i := range 3 {
		if got := signInAt(t, mixed, a, "guess-"+strconv.Itoa(i)); got.status != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in %d on A: %d; want 401", i+1, got.status)
		}
	}
	if got := bearerAt(t, mixed, b, "/admin/tenants", "adm"); got.status != http.StatusOK {
		t.Fatalf("the right token after 3 wrong: %d; want 200", got.status)
	}
	for i := range 2 {
		if got := bearerAt(t, mixed, b, "/metrics", "guess-"+strconv.Itoa(i)); got.status != http.StatusUnauthorized {
			t.Fatalf("wrong /metrics bearer %d on B: %d; want 401", i+1, got.status)
		}
	}
	wantAdmin429(t, "the right token after 3 wrong sign-ins on A and 2 wrong bearers on B", bearerAt(t, mixed, a, "/admin/tenants", "adm"))

	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	keys, err := rs.Client().Keys(ctx, "corral:v1:lockout:*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if ttl := rs.Client().PTTL(ctx, k).Val(); ttl <= 0 || ttl > time.Minute {
			t.Errorf("key %s: TTL %v; want at most a minute", k, ttl)
		}
	}
	if len(keys) == 0 {
		t.Error("no lockout key in Redis")
	}
}

// TestAdminTokenLockoutRedisDown: with Redis stopped, each instance's
// own count still locks a guessing address out after 5 wrong tokens,
// while another address signs in.
func TestAdminTokenLockoutRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	a := lockoutGateways(t, 1, "CORRAL_REDIS_URL="+rs.URL())[0]
	rs.Stop()
	guesser, other := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.1")
	for i := range 5 {
		if got := signInAt(t, guesser, a, "guess-"+strconv.Itoa(i)); got.status != http.StatusUnauthorized {
			t.Fatalf("wrong sign-in %d with Redis down: %d; want 401", i+1, got.status)
		}
	}
	wantAdmin429(t, "the right token with Redis down", bearerAt(t, guesser, a, "/admin/tenants", "adm"))
	if got := bearerAt(t, other, a, "/admin/tenants", "adm"); got.status != http.StatusOK {
		t.Errorf("another address's right token with Redis down: %d; want 200", got.status)
	}
}

// TestAdminTokenLockoutEmbedded: embedded mode throttles the same way,
// in process.
func TestAdminTokenLockoutEmbedded(t *testing.T) {
	a := lockoutGateways(t, 1)[0]
	guesser, other := clientFrom(t, "127.0.0.2"), clientFrom(t, "127.0.0.1")
	for i := range 5 {
		if got := bearerAt(t, guesser, a, "/admin/tenants", "guess-"+strconv.Itoa(i)); got.status != http.StatusUnauthorized {
			t.Fatalf("wrong token %d: %d; want 401", i+1, got.status)
		}
	}
	wantAdmin429(t, "the right token after 5 wrong", bearerAt(t, guesser, a, "/admin/tenants", "adm"))
	wantPage429(t, "the console sign-in after 5 wrong", signInAt(t, guesser, a, "adm"))
	if got := bearerAt(t, other, a, "/admin/tenants", "adm"); got.status != http.StatusOK {
		t.Errorf("another address's right token: %d; want 200", got.status)
	}
	wantSignedIn(t, "another address's sign-in", signInAt(t, other, a, "adm"))
}
