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

// slowModel is an OpenAI-compatible upstream whose generations for a
// prompt containing "slow" never finish: it holds the request until the
// caller gives up (its timeout), as a long generation does. Every other
// request gets a chat completion at once, or status when one is set.
type slowModel struct {
	srv    *httptest.Server
	calls  atomic.Int64
	status atomic.Int64 // 0: answer
}

func newSlowModel(t *testing.T) *slowModel {
	f := &slowModel{}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "slow") {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if st := f.status.Load(); st != 0 {
			w.WriteHeader(int(st))
			_, _ = io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","param":null,"code":null}}`)
			return
		}
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// testClock is a settable clock for the pool's open period.
type testClock struct{ ns atomic.Int64 }

func (c *testClock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *testClock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// lone is a router over one shared upstream at url, with health kept (as
// with an upstreams file), whose calls time out after callTimeout.
func lone(t *testing.T, url string, callTimeout time.Duration, clock *testClock) (*Router, *pool.Member) {
	t.Helper()
	c, err := upstream.New(upstream.Options{BaseURL: url, Timeout: callTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	m := &pool.Member{Name: "shared", API: "openai", Weight: 1}
	clock.ns.Store(time.Unix(1000, 0).UnixNano())
	p := pool.New([]*pool.Member{m}, pool.Options{Now: clock.now, Seed: 1})
	return New(&Set{Pool: p, Clients: map[string]Doer{"shared": c}}, Options{Timeout: 10 * time.Second}), m
}

func ask(r *Router, tenant, prompt string) (*http.Response, error) {
	resp, err := r.Do(context.Background(), "openai", "m", upstream.Request{Method: "POST", Path: "/chat/completions", Tenant: tenant,
		Body: []byte(`{"model":"m","messages":[{"role":"user","content":"` + prompt + `"}]}`)})
	if err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return resp, err
}

// One tenant's slow generations, each running into the upstream timeout,
// are that tenant's own problem: they do not open the shared upstream's
// circuit, so the other tenants' requests still reach it.
func TestOneTenantsTimeoutsKeepTheCircuitClosed(t *testing.T) {
	up := newSlowModel(t)
	var clock testClock
	r, m := lone(t, up.srv.URL+"/v1", 50*time.Millisecond, &clock)
	for i := range 2 * pool.FailuresToOpen {
		if _, err := ask(r, "offender", "slow please"); upstream.KindOf(err) != upstream.Timeout {
			t.Fatalf("slow request %d: %v; want a timeout", i, err)
		}
	}
	if got := m.State(clock.now()); got != pool.Closed {
		t.Errorf("after one tenant's %d timeouts the circuit is %v; want closed", 2*pool.FailuresToOpen, got)
	}
	before := up.calls.Load()
	resp, err := ask(r, "other", "hello")
	if err != nil {
		t.Fatalf("another tenant's request: %v; want it to reach the upstream", err)
	}
	if resp.StatusCode != 200 || up.calls.Load() != before+1 {
		t.Errorf("another tenant's request: %d, %d upstream calls; want 200 from the upstream", resp.StatusCode, up.calls.Load()-before)
	}
}

// When other tenants' requests time out too, the upstream is ill and its
// circuit opens as before.
func TestTimeoutsOfTwoTenantsOpenTheCircuit(t *testing.T) {
	up := newSlowModel(t)
	var clock testClock
	r, m := lone(t, up.srv.URL+"/v1", 50*time.Millisecond, &clock)
	for range pool.FailuresToOpen - 1 {
		_, _ = ask(r, "offender", "slow please")
	}
	if _, err := ask(r, "other", "slow too"); upstream.KindOf(err) != upstream.Timeout {
		t.Fatalf("the other tenant's slow request: %v; want a timeout", err)
	}
	if got := m.State(clock.now()); got != pool.Open {
		t.Fatalf("after %d timeouts from two tenants: %v; want open", pool.FailuresToOpen, got)
	}
	if _, err := ask(r, "third", "hello"); !errors.Is(err, ErrNoneAvailable) {
		t.Errorf("while open: %v; want ErrNoneAvailable", err)
	}
}

// Failures only the upstream causes (connection errors, 5xx, 429 without
// Retry-After) open the circuit whichever tenants' calls met them.
func TestUpstreamFailuresFromTwoTenantsOpenTheCircuit(t *testing.T) {
	tests := []struct {
		name   string
		status int // 0: the upstream's port is closed
	}{
		{"connection errors", 0},
		{"500", 500},
		{"503", 503},
		{"429 without Retry-After", 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := newSlowModel(t)
			url := up.srv.URL + "/v1"
			if tt.status == 0 {
				url = "http://127.0.0.1:1/v1"
			}
			up.status.Store(int64(tt.status))
			var clock testClock
			r, m := lone(t, url, 5*time.Second, &clock)
			for i := range pool.FailuresToOpen {
				_, _ = ask(r, []string{"a", "b"}[i%2], "hello")
			}
			if got := m.State(clock.now()); got != pool.Open {
				t.Fatalf("after %d failures: %v; want open", pool.FailuresToOpen, got)
			}
			if _, err := ask(r, "c", "hello"); !errors.Is(err, ErrNoneAvailable) {
				t.Errorf("while open: %v; want ErrNoneAvailable", err)
			}
		})
	}
}

// A pinned follow-up (an object's upstream, called past the circuit)
// that succeeds does not close an open circuit: only the half-open probe
// does.
func TestPinnedSuccessDoesNotCloseTheCircuit(t *testing.T) {
	up := newSlowModel(t)
	var clock testClock
	r, m := lone(t, up.srv.URL+"/v1", 5*time.Second, &clock)
	up.status.Store(500)
	for i := range pool.FailuresToOpen {
		_, _ = ask(r, []string{"a", "b"}[i%2], "hello")
	}
	up.status.Store(0)
	resp, err := r.DoAt(context.Background(), "shared", upstream.Request{Method: "GET", Path: "/files/file-1", Tenant: "a"})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pinned follow-up: %d", resp.StatusCode)
	}
	if got := m.State(clock.now()); got != pool.Open {
		t.Fatalf("after a pinned success: %v; want still open", got)
	}
	if _, err := ask(r, "b", "hello"); !errors.Is(err, ErrNoneAvailable) {
		t.Errorf("after a pinned success: %v; want ErrNoneAvailable", err)
	}
	clock.advance(pool.OpenFor)
	if _, err := ask(r, "b", "hello"); err != nil {
		t.Fatalf("the probe: %v", err)
	}
	if got := m.State(clock.now()); got != pool.Closed {
		t.Errorf("after a good probe: %v; want closed", got)
	}
}

// An upstream that refuses Corral's own credentials (401, 403) answers
// each call with that status (the server makes it a 502). Refusals of one
// tenant's calls alone never open the circuit (a model only that tenant
// names may be what the account may not use); once two tenants' calls are
// refused, they count as failures do and FailuresToOpen of them open it.
func TestCredentialRefusalsOpenTheCircuit(t *testing.T) {
	for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden} {
		up := newSlowModel(t)
		up.status.Store(int64(status))
		var clock testClock
		r, m := lone(t, up.srv.URL+"/v1", time.Second, &clock)
		for i := range 2 * pool.FailuresToOpen {
			resp, err := ask(r, "offender", "hello")
			if err != nil || resp.StatusCode != status {
				t.Fatalf("%d: call %d: %v %v; want the upstream's %d as the answer", status, i, resp, err, status)
			}
		}
		if got := m.State(clock.now()); got != pool.Closed {
			t.Fatalf("%d: after one tenant's %d refusals the circuit is %v; want closed", status, 2*pool.FailuresToOpen, got)
		}
		if resp, err := ask(r, "other", "hello"); err != nil || resp.StatusCode != status {
			t.Fatalf("%d: another tenant's call: %v %v", status, resp, err)
		}
		if got := m.State(clock.now()); got != pool.Open {
			t.Fatalf("%d: after two tenants' refusals the circuit is %v; want open", status, got)
		}
		calls := up.calls.Load()
		if _, err := ask(r, "third", "hello"); !errors.Is(err, ErrNoneAvailable) || up.calls.Load() != calls {
			t.Errorf("%d: with the circuit open: %v, %d more calls; want ErrNoneAvailable and no call", status, err, up.calls.Load()-calls)
		}
	}
}

// A Scoped upstream is passed over for the endpoints it does not serve: a
// stored-object call goes to the upstream that serves it, and with none
// the call is ErrNotServed and nothing is sent.
func TestScopedUpstreamPassedOverForEndpointsItDoesNotServe(t *testing.T) {
	cloud, plain := newSlowModel(t), newSlowModel(t)
	mk := func(url string) *upstream.Client {
		c, err := upstream.New(upstream.Options{BaseURL: url + "/v1"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	ms := []*pool.Member{{Name: "cloud", API: "openai", Weight: 1}, {Name: "plain", API: "openai", Weight: 1, Priority: 1}}
	r := New(&Set{Pool: pool.New(ms, pool.Options{Seed: 1}), Clients: map[string]Doer{
		"cloud": chatOnly{mk(cloud.srv.URL)}, "plain": mk(plain.srv.URL)}}, Options{})
	do := func(path string) error {
		resp, err := r.Do(context.Background(), "openai", "", upstream.Request{Method: "GET", Path: path})
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := do("/files"); err != nil || cloud.calls.Load() != 0 || plain.calls.Load() != 1 {
		t.Fatalf("GET /files: %v; calls cloud %d plain %d; want it at plain only", err, cloud.calls.Load(), plain.calls.Load())
	}
	if got := r.Primary("openai", "/files"); got != "plain" {
		t.Errorf("Primary for /files = %q; want plain", got)
	}
	if err := do("/chat/completions"); err != nil || cloud.calls.Load() != 1 {
		t.Errorf("chat: %v; cloud calls %d; want the cloud first", err, cloud.calls.Load())
	}
	r2 := New(&Set{Pool: pool.New(ms[:1], pool.Options{}), Clients: map[string]Doer{"cloud": chatOnly{mk(cloud.srv.URL)}}}, Options{})
	if _, err := r2.Do(context.Background(), "openai", "", upstream.Request{Method: "GET", Path: "/files"}); !errors.Is(err, ErrNotServed) {
		t.Errorf("only a cloud: %v; want ErrNotServed", err)
	}
	if got := r2.Primary("openai", "/files"); got != "" {
		t.Errorf("only a cloud: Primary = %q; want none", got)
	}
	// A follow-up pinned by name (an object's record) is not sent to a
	// cloud either: the name may have become one in a reload.
	before := cloud.calls.Load()
	if _, err := r2.DoAt(context.Background(), "cloud", upstream.Request{Method: "GET", Path: "/files/file-1"}); !errors.Is(err, ErrNotServed) {
		t.Errorf("pinned to a cloud: %v; want ErrNotServed", err)
	}
	if n := cloud.calls.Load() - before; n != 0 {
		t.Errorf("pinned to a cloud: %d calls reached it; want none", n)
	}
}

// chatOnly serves chat completions only, as a cloud's runtime API does.
type chatOnly struct{ Doer }

func (chatOnly) Serves(_, path string) bool { return path == "/chat/completions" }
