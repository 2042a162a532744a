package console

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRevocationsRedisHung: with Redis accepting connections but never
// answering, a signed-in page is refused (503, never served: a session
// whose revocation cannot be read might be signed out) within the
// revocation check's bound, not after the client's timeouts and retries;
// the sign-in page still answers.
func TestRevocationsRedisHung(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var mu sync.Mutex // protects conns
	var conns []net.Conn
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() { // accept and say nothing; ends when ln closes
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	// Timeouts longer than the console's bound; contexts honoured, as the
	// gateway's client does.
	rdb := redis.NewClient(&redis.Options{Addr: ln.Addr().String(), ReadTimeout: 10 * time.Second, MaxRetries: 3, ContextTimeoutEnabled: true})
	t.Cleanup(func() { rdb.Close() })
	c, err := New(Options{Backend: &fakeBackend{}, AdminToken: "tok", Revocations: NewRedisRevocations(rdb, nil)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	if code, _, _ := get(t, srv.URL, "/console/login", ""); code != http.StatusOK {
		t.Errorf("sign-in page with Redis hung: %d; want 200", code)
	}
	_, ck := signIn(t, srv.URL, "tok")
	if ck == "" {
		t.Fatal("no session cookie")
	}
	start := time.Now()
	code, h, body := get(t, srv.URL, "/console/", ck)
	took := time.Since(start)
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "Sessions cannot be checked right now") || h.Get("Content-Security-Policy") == "" {
		t.Errorf("overview with Redis hung: %d; want 503 with the message and the headers", code)
	}
	if took > revokedWait+time.Second {
		t.Errorf("overview with Redis hung took %v; want at most about %v", took, revokedWait)
	}
}

// stuckRevoke reads revocations but cannot record one: its Revoke waits
// for its context (a Redis that stopped answering mid-session).
type stuckRevoke struct{ *MemoryRevocations }

func (stuckRevoke) Revoke(ctx context.Context, _ string, _ time.Time) error {
	<-ctx.Done()
	return ctx.Err()
}

// TestSignOutStoreHung: a sign-out that cannot be recorded answers 503
// within the bound, saying the session still works, and leaves the
// cookie in place (the session was not ended, so the page must not say
// it was).
func TestSignOutStoreHung(t *testing.T) {
	c, err := New(Options{Backend: &fakeBackend{}, AdminToken: "tok", Revocations: stuckRevoke{NewMemoryRevocations(nil)}})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	_, ck := signIn(t, srv.URL, "tok")
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() {
		code, body := postForm(t, srv.URL, "/console/logout", ck, "application/x-www-form-urlencoded", "")
		done <- answer{code, body}
	}()
	select {
	case a := <-done:
		if a.code != http.StatusServiceUnavailable || !strings.Contains(a.body, "the session still works") {
			t.Errorf("sign-out with the store hung: %d; want 503 saying the session still works", a.code)
		}
	case <-time.After(revokedWait + 3*time.Second):
		t.Fatalf("sign-out with the store hung did not answer within %v", revokedWait+3*time.Second)
	}
}
