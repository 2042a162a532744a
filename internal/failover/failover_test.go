package failover

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// fakeUpstream answers with status (and headers) and counts its calls.
type fakeUpstream struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status atomic.Int64
	header http.Header
}

func newFake(t *testing.T, status int, h http.Header) *fakeUpstream {
	f := &fakeUpstream{header: h}
	f.status.Store(int64(status))
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		for k, v := range f.header {
			w.Header()[k] = v
		}
		w.Header().Set(UpstreamHeader, "spoofed")
		w.Header().Set(ProviderHeader, "spoofed")
		w.WriteHeader(int(f.status.Load()))
		_, _ = io.WriteString(w, `{"from":"`+r.Host+`"}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// router builds a router over fakes named in order, all in one API, with
// priorities 0, 1, 2, ... so the order is fixed.
func router(t *testing.T, api string, fakes ...*fakeUpstream) (*Router, []*pool.Member) {
	t.Helper()
	var ms []*pool.Member
	clients := map[string]Doer{}
	for i, f := range fakes {
		name := string(rune('a' + i))
		ms = append(ms, &pool.Member{Name: name, API: api, Priority: i, Weight: 1})
		url := "http://127.0.0.1:1/v1" // a closed port: connection refused
		if f != nil {
			url = f.srv.URL + "/v1"
		}
		c, err := upstream.New(upstream.Options{BaseURL: url, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		clients[name] = c
	}
	return New(&Set{Pool: pool.New(ms, pool.Options{Seed: 1}), Clients: clients}, Options{Timeout: 10 * time.Second}), ms
}

func call(t *testing.T, r *Router, api string) (*http.Response, error) {
	t.Helper()
	return r.Do(context.Background(), api, "m", upstream.Request{Method: "POST", Path: "/chat/completions", Body: []byte(`{}`)})
}

func TestFailoverTriggers(t *testing.T) {
	tests := []struct {
		api      string
		status   int
		failover bool
	}{
		{"openai", 429, true}, {"openai", 500, true}, {"openai", 502, true}, {"openai", 503, true}, {"openai", 504, true},
		{"anthropic", 529, true}, {"openai", 529, false},
		{"openai", 200, false}, {"openai", 400, false}, {"openai", 401, false}, {"openai", 404, false},
		{"openai", 408, false}, {"openai", 409, false}, {"openai", 422, false}, {"openai", 501, false},
	}
	for _, tt := range tests {
		first, second := newFake(t, tt.status, nil), newFake(t, 200, nil)
		r, _ := router(t, tt.api, first, second)
		resp, err := call(t, r, tt.api)
		if err != nil {
			t.Fatalf("%s %d: %v", tt.api, tt.status, err)
		}
		resp.Body.Close()
		wantFrom, wantStatus := "a", tt.status
		if tt.failover {
			wantFrom, wantStatus = "b", 200
		}
		if got := resp.Header.Get(UpstreamHeader); got != wantFrom || resp.StatusCode != wantStatus {
			t.Errorf("%s %d: answered %d by %q; want %d by %q", tt.api, tt.status, resp.StatusCode, got, wantStatus, wantFrom)
		}
		if n := second.calls.Load(); (n == 1) != tt.failover {
			t.Errorf("%s %d: second upstream called %d times", tt.api, tt.status, n)
		}
	}
}

func TestConnectionErrorAndTimeoutFailOver(t *testing.T) {
	good := newFake(t, 200, nil)
	r, _ := router(t, "openai", nil, good) // the first is a closed port
	resp, err := call(t, r, "openai")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(UpstreamHeader) != "b" {
		t.Errorf("after a refused connection: answered by %q", resp.Header.Get(UpstreamHeader))
	}

	// A first upstream that never sends its headers: its own timeout ends
	// the attempt and the second answers.
	hang := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	defer hung.Close()
	defer close(hang)
	slow, _ := upstream.New(upstream.Options{BaseURL: hung.URL + "/v1", Timeout: 100 * time.Millisecond})
	fast, _ := upstream.New(upstream.Options{BaseURL: good.srv.URL + "/v1"})
	ms := []*pool.Member{{Name: "slow", API: "openai", Weight: 1}, {Name: "fast", API: "openai", Priority: 1, Weight: 1}}
	r2 := New(&Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]Doer{"slow": slow, "fast": fast}}, Options{})
	resp, err = call(t, r2, "openai")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get(UpstreamHeader) != "fast" {
		t.Errorf("after a timeout before headers: answered by %q", resp.Header.Get(UpstreamHeader))
	}
}

func TestEveryCandidateFailedReturnsTheLast(t *testing.T) {
	a, b := newFake(t, 503, nil), newFake(t, 502, nil)
	r, _ := router(t, "openai", a, b)
	resp, err := call(t, r, "openai")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 502 || resp.Header.Get(UpstreamHeader) != "b" || !strings.Contains(string(body), "127.0.0.1") {
		t.Errorf("all failed: %d by %q %s; want b's 502", resp.StatusCode, resp.Header.Get(UpstreamHeader), body)
	}
	r2, _ := router(t, "openai", nil, nil)
	if _, err := call(t, r2, "openai"); upstream.KindOf(err) != upstream.Connect {
		t.Errorf("all unreachable: %v; want the last connection error", err)
	}
	if _, err := r.Do(context.Background(), "anthropic", "m", upstream.Request{Method: "GET", Path: "/x"}); !errors.Is(err, ErrNoRoute) {
		t.Errorf("no upstream for the API: %v; want ErrNoRoute", err)
	}
}

func TestCooldownFromRetryAfter(t *testing.T) {
	h := http.Header{}
	h.Set("Retry-After", "30")
	a, b := newFake(t, 429, h), newFake(t, 200, nil)
	r, ms := router(t, "openai", a, b)
	for range 3 {
		resp, err := call(t, r, "openai")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.Header.Get(UpstreamHeader) != "b" {
			t.Fatalf("answered by %q; want b", resp.Header.Get(UpstreamHeader))
		}
	}
	if n := a.calls.Load(); n != 1 {
		t.Errorf("the cooling upstream was called %d times; want 1 (then skipped for 30s)", n)
	}
	if s := ms[0].State(time.Now()); s != pool.Cooling {
		t.Errorf("state %v; want cooling", s)
	}
}

func TestCircuitOpensAfterFiveFailures(t *testing.T) {
	a, b := newFake(t, 500, nil), newFake(t, 200, nil)
	r, ms := router(t, "openai", a, b)
	for range 8 {
		resp, err := call(t, r, "openai")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	if n := a.calls.Load(); n != pool.FailuresToOpen {
		t.Errorf("the failing upstream was called %d times; want %d, then its circuit is open", n, pool.FailuresToOpen)
	}
	if s := ms[0].State(time.Now()); s != pool.Open {
		t.Errorf("state %v; want open", s)
	}
}

func TestStreamedBodyGetsOneAttempt(t *testing.T) {
	a, b := newFake(t, 503, nil), newFake(t, 200, nil)
	r, _ := router(t, "openai", a, b)
	resp, err := r.Do(context.Background(), "openai", "m", upstream.Request{Method: "POST", Path: "/files",
		Stream: strings.NewReader("bytes"), ContentLength: 5})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || b.calls.Load() != 0 {
		t.Errorf("a streamed body was sent twice: %d, second calls %d", resp.StatusCode, b.calls.Load())
	}
}

func TestRetryAfterForms(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	tests := []struct {
		ms, ra string
		want   time.Duration
		ok     bool
	}{
		{"1500", "", 1500 * time.Millisecond, true},
		{"", "2", 2 * time.Second, true},
		{"", now.Add(5 * time.Second).Format(http.TimeFormat), 5 * time.Second, true},
		{"", "soon", 0, false},
		{"", "", 0, false},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.ms != "" {
			h.Set("retry-after-ms", tt.ms)
		}
		if tt.ra != "" {
			h.Set("Retry-After", tt.ra)
		}
		if d, ok := retryAfter(h, now); d != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q, %q) = %v, %v; want %v, %v", tt.ms, tt.ra, d, ok, tt.want, tt.ok)
		}
	}
}
