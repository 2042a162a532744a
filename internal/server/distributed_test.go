package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
)

// distributed is a harness of n instances sharing one real redis-server.
func distributed(tb testing.TB, n int, opts ...func(*harnessOptions)) (*harness, *redistest.Server) {
	tb.Helper()
	rs := redistest.Start(tb)
	h := newHarness(tb, append([]func(*harnessOptions){func(o *harnessOptions) {
		o.redis, o.instances = rs, n
	}}, opts...)...)
	return h, rs
}

func promptHash(t *testing.T, tenant, body string) string {
	t.Helper()
	req, err := keying.Parse(tenant, "/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return req.Hash
}

func TestDistributedStampede(t *testing.T) {
	gate := make(chan struct{})
	h, rs := distributed(t, 3, func(o *harnessOptions) { o.gate = gate })
	go func() {
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		close(gate)
	}()
	body := chatBody("three instances, one call")
	answers := burst(h.bases(), 200, acmeKey, body)
	wantOneLeader(t, h, answers, "one leader across the instances")
	// The entry is in Redis under the design's key, and the lock is gone.
	ctx := context.Background()
	hash := promptHash(t, "acme", body)
	rdb := rs.Client()
	if n, _ := rdb.Exists(ctx, keying.Name("acme", hash, keying.Response)).Result(); n != 1 {
		t.Error("response entry not in Redis")
	}
	if n, _ := rdb.Exists(ctx, keying.Name("acme", hash, keying.Lock)).Result(); n != 0 {
		t.Error("lock left in Redis after the flight")
	}
	// Every instance now answers from Redis.
	for _, base := range h.bases() {
		if a := send(ctx, base, acmeKey, body); a.header.Get("X-Corral-Cache") != cacheHit || a.body != answers[0].body {
			t.Errorf("%s: %s", base, a.header.Get("X-Corral-Cache"))
		}
	}
}

func TestDistributedStreamsOneCall(t *testing.T) {
	gate := make(chan struct{})
	h, _ := distributed(t, 3, func(o *harnessOptions) { o.gate = gate; o.mock.StreamChunks = 5 })
	go func() {
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		close(gate)
	}()
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"streams everywhere"}]}`
	answers := burst(h.bases(), 60, acmeKey, body)
	for i, a := range answers {
		if a.status != 200 || !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
			t.Fatalf("stream %d: %d %q", i, a.status, a.body)
		}
		if got := sseText(t, a.body); got != "mock reply to: streams everywhere" {
			t.Errorf("stream %d text = %q", i, got)
		}
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
	// A later streaming request is a hit (read with the lock call).
	a := send(context.Background(), h.gws[2].URL, acmeKey, body)
	if a.header.Get("X-Corral-Cache") != cacheHit || a.header.Get("Age") == "" || sseText(t, a.body) != "mock reply to: streams everywhere" {
		t.Errorf("streaming hit: %s Age=%q", a.header.Get("X-Corral-Cache"), a.header.Get("Age"))
	}
}

func TestDistributedTakeoverFromDeadLeader(t *testing.T) {
	h, rs := distributed(t, 2, func(o *harnessOptions) { o.lockTTL = 300 * time.Millisecond })
	body := chatBody("orphaned lock")
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	// A leader that died mid-call: its lock is left behind, never renewed.
	if err := rs.Client().Set(context.Background(), lock, "dead-instance", 300*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	answers := burst(h.bases(), 20, acmeKey, body)
	wantOneLeader(t, h, answers, "the one waiter that took over")
}

func TestDistributedWaitTimeoutCallsUpstream(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.lockTTL = time.Minute
		o.server = func(so *Options) { so.WaitTimeout = 200 * time.Millisecond }
	})
	body := chatBody("stuck leader")
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	if err := rs.Client().Set(context.Background(), lock, "stuck", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if a.status != 200 || h.mock.Stats().Requests != 1 {
		t.Errorf("after the wait timeout: %d with %d upstream calls; want 200 and 1", a.status, h.mock.Stats().Requests)
	}
	// The lock someone else holds is left alone.
	if v, _ := rs.Client().Get(context.Background(), lock).Result(); v != "stuck" {
		t.Errorf("lock = %q; want the other holder's lock untouched", v)
	}
}

func TestDistributedWaitTimeoutFail(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.lockTTL = time.Minute
		o.server = func(so *Options) { so.WaitTimeout, so.FailOnWaitTimeout = 100*time.Millisecond, true }
	})
	body := chatBody("stuck leader, fail")
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	if err := rs.Client().Set(context.Background(), lock, "stuck", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if a.status != 504 || !strings.Contains(a.body, `"code":"upstream_timeout"`) || h.mock.Stats().Requests != 0 {
		t.Errorf("got %d %s with %d upstream calls; want 504 upstream_timeout and none", a.status, a.body, h.mock.Stats().Requests)
	}
}

func TestRedisOutageServesAndRecovers(t *testing.T) {
	h, rs := distributed(t, 2)
	if !rs.Stoppable() {
		t.Skip("external Redis cannot be stopped")
	}
	ctx := context.Background()
	rs.Stop()
	for i, base := range append(h.bases(), h.bases()...) {
		a := send(ctx, base, acmeKey, chatBody("during the outage"))
		if a.status != 200 {
			t.Fatalf("request %d during the outage: %d %s", i, a.status, a.body)
		}
	}
	if h.srv.RedisHealthy() {
		t.Error("RedisHealthy during the outage")
	}
	rs.Restart()
	body := chatBody("after the outage")
	hash := promptHash(t, "acme", body)
	rdb := rs.Client()
	// Redis is probed again after the backoff; keep asking until an entry
	// lands (bounded), then check it is served from Redis.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if a := send(ctx, h.gw.URL, acmeKey, body); a.status != 200 {
			t.Fatalf("after restart: %d", a.status)
		}
		if n, _ := rdb.Exists(ctx, keying.Name("acme", hash, keying.Response)).Result(); n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("entries are not stored in Redis again after it came back")
		}
		time.Sleep(20 * time.Millisecond) // waiting out the probe backoff
	}
	if !h.srv.RedisHealthy() {
		t.Error("not healthy after Redis came back")
	}
	if a := send(ctx, h.gws[1].URL, acmeKey, body); a.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("other instance after recovery: %s; want HIT from Redis", a.header.Get("X-Corral-Cache"))
	}
}

func TestNoCacheCoalescesAcrossInstances(t *testing.T) {
	gate := make(chan struct{})
	refused := make(chan struct{}, 8) // a lock attempt found another leader: a waiter exists
	h, _ := distributed(t, 2, func(o *harnessOptions) {
		o.gate = gate
		o.server = func(so *Options) { so.Locker = refusalSignal{Locker: so.Locker, refused: refused} }
	})
	go func() {
		// The leader's call is held at the upstream until the other
		// instance's request has found the lock taken, so the two overlap.
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		<-refused
		close(gate)
	}()
	answers := make(chan answer, 2)
	for _, base := range h.bases() {
		go func() {
			answers <- send(context.Background(), base, acmeKey, chatBody("fresh please"), "Cache-Control", "no-cache")
		}()
	}
	got := []string{(<-answers).header.Get("X-Corral-Cache"), (<-answers).header.Get("X-Corral-Cache")}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("two no-cache requests on two instances made %d upstream calls (%v); want 1", n, got)
	}
}

// refusalSignal is a Locker that signals every refused acquisition.
type refusalSignal struct {
	coalesce.Locker
	refused chan<- struct{}
}

func (l refusalSignal) TryAcquire(ctx context.Context, name string, clear ...string) (coalesce.Release, bool, error) {
	rel, ok, err := l.Locker.TryAcquire(ctx, name, clear...)
	l.signal(ok, err)
	return rel, ok, err
}

func (l refusalSignal) TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (coalesce.Release, bool, []*entry.Entry, error) {
	rel, ok, found, err := l.Locker.TryAcquireOrRead(ctx, name, keys, clear...)
	l.signal(ok, err)
	return rel, ok, found, err
}

func (l refusalSignal) signal(ok bool, err error) {
	if !ok && err == nil {
		select {
		case l.refused <- struct{}{}:
		default:
		}
	}
}

func TestUnreadableEntryDoesNotBlockTheLock(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.server = func(so *Options) { so.WaitTimeout, so.FailOnWaitTimeout = time.Minute, true }
	})
	body := chatBody("corrupt entry")
	name := keying.Name("acme", promptHash(t, "acme", body), keying.Response)
	rs.Client().Set(context.Background(), name, "not an entry", time.Minute)
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("with an unreadable entry: %d %s; want a MISS that replaces it", a.status, a.header.Get("X-Corral-Cache"))
	}
}
