package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/negcache"
)

// An upstream that sends its headers and then hangs is waited out once for
// a burst over three instances, not once per instance one after another:
// the leader's failure is left in Redis for a moment and the waiters on
// the other instances answer with it instead of leading a new attempt.
func TestUpstreamStallWaitedOutOnce(t *testing.T) {
	const (
		timeout   = 2 * time.Second
		instances = 3
		n         = 30
	)
	tests := []struct {
		name   string
		give   string
		stream bool
	}{
		{"json", `{"model":"mock-stall","messages":[{"role":"user","content":"stalls after its headers"}]}`, false},
		{"stream", `{"model":"mock-stall","stream":true,"messages":[{"role":"user","content":"stalls after its headers"}]}`, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gate := make(chan struct{})
			h, rs := distributed(t, instances, func(o *harnessOptions) { o.upstreamTimeout, o.gate = timeout, gate })
			// The upstream answers once every request has joined its
			// instance's flight (one flight per instance, the rest joined).
			go func() {
				defer close(gate)
				waitFor(t, func() bool {
					for _, s := range h.srvs {
						if st := s.groupFor("acme").Stats(); st.Loads+st.Joined != n/instances {
							return false
						}
					}
					return true
				})
			}()
			start := time.Now()
			answers := burst(h.bases(), n, acmeKey, tt.give)
			elapsed := time.Since(start)

			if calls := h.mock.Stats().Requests; calls != 1 {
				t.Fatalf("upstream calls = %d; want 1 (each attempt waits out the %v timeout)", calls, timeout)
			}
			if elapsed >= 2*timeout {
				t.Errorf("the burst took %v; want less than two timeouts (%v)", elapsed, 2*timeout)
			}
			var jsonBody string
			counts := map[string]int{}
			for i, a := range answers {
				counts[a.header.Get("X-Corral-Cache")]++
				switch {
				case a.err != nil:
					t.Fatalf("answer %d: %v", i, a.err)
				case tt.stream && a.status == 200:
					// The leader's instance had relayed the headers: its
					// clients' streams end with the error event.
					if !strings.Contains(a.body, `"code":"upstream_timeout"`) || strings.Contains(a.body, "[DONE]") {
						t.Errorf("answer %d: stream %q; want an upstream_timeout error event and no [DONE]", i, a.body)
					}
				case a.status != 504 || !strings.Contains(a.body, `"code":"upstream_timeout"`):
					t.Errorf("answer %d: %d %s; want 504 upstream_timeout", i, a.status, a.body)
				case jsonBody == "":
					jsonBody = a.body
				case a.body != jsonBody:
					t.Errorf("answer %d: body %s; want the leader's %s", i, a.body, jsonBody)
				}
			}
			if counts[cacheMiss] != 1 || counts[cacheCoalesced] != n-1 {
				t.Errorf("X-Corral-Cache counts = %v; want 1 MISS and %d COALESCED", counts, n-1)
			}

			// Nothing is remembered as an answer: a transient failure is
			// neither a positive nor a negative entry, and the lock is gone.
			ctx := context.Background()
			hash := promptHash(t, "acme", tt.give)
			rdb := rs.Client()
			for _, key := range []string{keying.Name("acme", hash, keying.Response), negcache.Key("acme", hash), keying.Name("acme", hash, keying.Lock)} {
				if got, _ := rdb.Exists(ctx, key).Result(); got != 0 {
					t.Errorf("%s left in Redis after a transient failure", key)
				}
			}
			if ttl, _ := rdb.PTTL(ctx, keying.Name("acme", hash, keying.Failure)).Result(); ttl <= 0 || ttl > 5*time.Second {
				t.Errorf("failure marker TTL = %v; want a few seconds at most", ttl)
			}
		})
	}
}

// The marker answers only requests that were waiting for the failed
// leader: a request that arrives afterwards is a new attempt.
func TestUpstreamStallNextRequestFlies(t *testing.T) {
	h, _ := distributed(t, 2, func(o *harnessOptions) { o.upstreamTimeout = 300 * time.Millisecond })
	body := `{"model":"mock-stall","messages":[{"role":"user","content":"a new attempt after"}]}`
	for i, base := range h.bases() {
		a := send(context.Background(), base, acmeKey, body)
		if a.status != 504 || a.header.Get("X-Corral-Cache") != cacheMiss {
			t.Errorf("request %d: %d %s; want 504 MISS", i, a.status, a.header.Get("X-Corral-Cache"))
		}
	}
	if calls := h.mock.Stats().Requests; calls != 2 {
		t.Errorf("upstream calls = %d; want 2 (one per request that came after a failure)", calls)
	}
}
