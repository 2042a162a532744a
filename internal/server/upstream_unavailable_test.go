package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire/openai"
)

// A 503 upstream_unavailable (every upstream for the model has its
// circuit open) is Corral's refusal, not an answer: it is not charged to
// the tenant's tokens/min, and it carries no X-Corral-Cache or
// Cache-Status, on a cached call, a streamed one and a bypass alike.
func TestUpstreamUnavailableIsNotChargedNorCached(t *testing.T) {
	const meteredKey, perMinute = "sk-metered-test-key", 100000
	shared := newFakeUpstream(t, "shared", mockllm.Options{})
	h := newHarness(t, withRouters(upSpec{shared, 0, 1}), func(o *harnessOptions) {
		o.tenants = append(o.tenants, tenant.Spec{ID: "metered", KeySHA256: []string{tenant.HashKey(meteredKey)},
			Policy: tenant.Policy{TokensPerMinute: perMinute, MaxLeaders: 8, CacheTTL: time.Hour, Cache: true}})
	})
	shared.status.Store(500)
	for i := range pool.FailuresToOpen {
		if ans := send(context.Background(), h.gw.URL, acmeKey, chatBody(fmt.Sprintf("failing %d", i))); ans.status != 500 {
			t.Fatalf("failure %d: %d %s", i, ans.status, ans.body)
		}
	}
	calls := shared.calls.Load()
	tests := []struct {
		name   string
		body   string
		header []string
	}{
		{"cached", chatBody("while open"), nil},
		{"streamed", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"streamed while open"}]}`, nil},
		{"bypass", chatBody("bypass while open"), []string{"Cache-Control", "no-store"}},
		{"cached again", chatBody("again while open"), nil},
	}
	for _, tt := range tests {
		ans := send(context.Background(), h.gw.URL, meteredKey, tt.body, tt.header...)
		if ans.status != 503 || !strings.Contains(ans.body, `"code":"upstream_unavailable"`) {
			t.Fatalf("%s: %d %s; want 503 upstream_unavailable", tt.name, ans.status, ans.body)
		}
		if c, cs := ans.header.Get("X-Corral-Cache"), ans.header.Get("Cache-Status"); c != "" || cs != "" {
			t.Errorf("%s: X-Corral-Cache %q, Cache-Status %q on a 503 upstream_unavailable; want none", tt.name, c, cs)
		}
		// Nothing was taken, by this request or one before it: the bucket
		// is full.
		if v := ans.header.Get("x-ratelimit-remaining-tokens"); v != "" && v != strconv.Itoa(perMinute) {
			t.Errorf("%s: %s tokens remaining after only 503s; want %d (nothing charged)", tt.name, v, perMinute)
		}
	}
	if n := shared.calls.Load() - calls; n != 0 {
		t.Errorf("%d upstream calls while its circuit was open; want 0", n)
	}
}

// Through the gateway: one tenant's generations that run into the
// upstream timeout do not open the circuit of the upstream every tenant
// shares; the other tenant's request still reaches it.
func TestOneTenantsTimeoutsDoNotCloseTheUpstreamToOthers(t *testing.T) {
	mock := mockllm.New(mockllm.Options{})
	var calls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "very long essay") {
			<-r.Context().Done() // a generation longer than the upstream timeout
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(up.Close)
	h := newHarness(t, withServer(func(so *Options) {
		c, err := upstream.New(upstream.Options{BaseURL: up.URL + "/v1", APIKey: upstreamKey, Timeout: 100 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		ms := []*pool.Member{{Name: "shared", API: "openai", Weight: 1}}
		so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]failover.Doer{"shared": c}}, failover.Options{Timeout: 10 * time.Second})
	}))
	for i := range 2 * pool.FailuresToOpen {
		if ans := send(context.Background(), h.gw.URL, acmeKey, chatBody(fmt.Sprintf("a very long essay %d", i))); ans.status != 504 {
			t.Fatalf("slow request %d: %d %s; want 504 upstream_timeout", i, ans.status, ans.body)
		}
	}
	before := calls.Load()
	ans := send(context.Background(), h.gw.URL, limitedKey, chatBody("a short answer"))
	if ans.status != 200 || calls.Load() != before+1 {
		t.Errorf("the other tenant after the offender's timeouts: %d %s, %d upstream calls; want 200 from the upstream", ans.status, ans.body, calls.Load()-before)
	}
}

// TestNoUpstreamAvailableIsNotSharedAcrossInstances: a leader refused by
// its own pool (every upstream cooling down or open) leaves no failure
// for the waiters on other instances, whose pools may take the call: they
// lead themselves instead of being served the refusal as COALESCED. A
// failure of an upstream call is still shared.
func TestNoUpstreamAvailableIsNotSharedAcrossInstances(t *testing.T) {
	req := &coalesce.Request{Format: openai.Format{}}
	if e := renderFailure(req, fmt.Errorf("chat: %w", failover.ErrNoneAvailable)); e != nil {
		t.Errorf("no upstream available rendered for other instances' waiters: %d %s", e.Status, e.Body)
	}
	e := renderFailure(req, &upstream.Error{Kind: upstream.Timeout, Err: context.DeadlineExceeded})
	if e == nil || e.Status != http.StatusGatewayTimeout || !bytes.Contains(e.Body, []byte(`"code":"upstream_timeout"`)) {
		t.Fatalf("an upstream timeout is not shared with its waiters: %+v", e)
	}
}
