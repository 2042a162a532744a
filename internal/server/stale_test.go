package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/tenant"
)

const (
	staleKey = "sk-stale-test-key"
	keepKey  = "sk-keep-test-key"
)

// staleTenant keeps its entries for 10 minutes past a 1h TTL
// (stale_while_revalidate 10m, stale_if_error 5m).
var staleTenant = tenant.Spec{ID: "stale", KeySHA256: []string{tenant.HashKey(staleKey)}, MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true,
	StaleWhileRevalidate: 10 * time.Minute, StaleIfError: 5 * time.Minute}

// keepTenant has only stale_if_error (10m): its entries are kept past a
// 1h TTL but never answered at once.
var keepTenant = tenant.Spec{ID: "keep", KeySHA256: []string{tenant.HashKey(keepKey)}, MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true, StaleIfError: 10 * time.Minute}

// testClock is a settable clock shared by a test's gateways and stores.
type testClock struct {
	mu  sync.Mutex
	now time.Time
}

func newTestClock() *testClock { return &testClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }

func (c *testClock) Advance(d time.Duration) { c.mu.Lock(); c.now = c.now.Add(d); c.mu.Unlock() }

// TestStaleWindowsKeepEntriesDistributed: on 3 instances sharing one real
// redis-server, a tenant's entry is kept in Redis for its TTL plus the
// larger stale window and still knows its own TTL; past the TTL it is not
// a hit on any instance (the combined lock-and-read finds the kept entry
// and must still take the lock), and the new answer replaces it. A
// tenant without windows keeps its entries for the TTL alone.
func TestStaleWindowsKeepEntriesDistributed(t *testing.T) {
	clock := newTestClock()
	h, rs := distributed(t, 3, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{keepTenant}
		rsrv := o.redis // set by distributed before this option runs
		o.server = func(so *Options) {
			so.Now = clock.Now
			so.Cache = cache.NewRedis(testRedisClient(t, rsrv), cache.RedisOptions{Now: clock.Now})
		}
	})
	ctx := context.Background()
	rdb := rs.Client()
	body := chatBody("kept past its ttl")
	name := keying.Name("keep", promptHash(t, "keep", body), keying.Response)

	if a := send(ctx, h.gws[0].URL, keepKey, body); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("first: %d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
	}
	pttl, err := rdb.PTTL(ctx, name).Result()
	if err != nil || pttl <= time.Hour+9*time.Minute || pttl > time.Hour+10*time.Minute {
		t.Errorf("Redis PTTL = %v, %v; want just under 1h10m (TTL + the larger window)", pttl, err)
	}
	first := redisEntry(t, rdb.Get(ctx, name))
	if first.TTL != time.Hour || !first.StoredAt.Equal(clock.Now()) || !first.FreshUntil().Equal(clock.Now().Add(time.Hour)) {
		t.Errorf("stored entry TTL %v StoredAt %v; want 1h from the injected clock", first.TTL, first.StoredAt)
	}

	// The last instant of the TTL: a hit everywhere.
	clock.Advance(time.Hour - time.Second)
	if a := send(ctx, h.gws[1].URL, keepKey, body); a.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("within the TTL: %s; want HIT", a.header.Get("X-Corral-Cache"))
	}
	// Past the TTL the entry is still in Redis, but no instance serves it
	// as a hit: the request calls upstream and the answer replaces it.
	clock.Advance(time.Second)
	if a := send(ctx, h.gws[2].URL, keepKey, body); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("past the TTL: %d %s; want a MISS", a.status, a.header.Get("X-Corral-Cache"))
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
	if e := redisEntry(t, rdb.Get(ctx, name)); !e.StoredAt.Equal(clock.Now()) {
		t.Errorf("entry StoredAt = %v after the new call; want it replaced at %v", e.StoredAt, clock.Now())
	}
	if n, _ := rdb.Exists(ctx, keying.Name("keep", promptHash(t, "keep", body), keying.Lock)).Result(); n != 0 {
		t.Error("lock left in Redis after the call past the TTL")
	}
	if a := send(ctx, h.gws[0].URL, keepKey, body); a.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("after the new call: %s; want HIT", a.header.Get("X-Corral-Cache"))
	}

	// A streaming request past the TTL takes the same path (its lookup
	// rides the lock's round trip).
	clock.Advance(time.Hour)
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"kept past its ttl"}]}`
	if a := send(ctx, h.gws[1].URL, keepKey, stream); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("stream past the TTL: %d %s; want a MISS", a.status, a.header.Get("X-Corral-Cache"))
	}

	// Without windows, an entry lives for its TTL alone.
	plain := chatBody("no windows")
	send(ctx, h.gws[0].URL, acmeKey, plain)
	pttl, err = rdb.PTTL(ctx, keying.Name("acme", promptHash(t, "acme", plain), keying.Response)).Result()
	if err != nil || pttl <= 59*time.Minute || pttl > time.Hour {
		t.Errorf("acme PTTL = %v, %v; want just under 1h", pttl, err)
	}
}

// TestStaleWindowsKeepEntriesEmbedded: the memory store keeps an entry
// for its TTL plus the larger window, and past the TTL it is not a hit.
func TestStaleWindowsKeepEntriesEmbedded(t *testing.T) {
	clock, advance, store := fakeClockStore(t)
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{keepTenant}
		o.server = func(so *Options) { so.Cache, so.Now = store, clock }
	})
	ctx := context.Background()
	body := chatBody("kept in memory")
	name := keying.Name("keep", promptHash(t, "keep", body), keying.Response)
	if a := send(ctx, h.gw.URL, keepKey, body); a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("first: %s", a.header.Get("X-Corral-Cache"))
	}
	advance(time.Hour)
	e, err := store.Get(ctx, name)
	if err != nil || e.TTL != time.Hour {
		t.Fatalf("store.Get at the TTL = %v, %v; want the kept entry with its 1h TTL", e, err)
	}
	if a := send(ctx, h.gw.URL, keepKey, body); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("past the TTL: %d %s; want a MISS", a.status, a.header.Get("X-Corral-Cache"))
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
	// The replacement is kept for 1h10m from now: gone only after that.
	advance(time.Hour + 10*time.Minute - time.Second)
	if _, err := store.Get(ctx, name); err != nil {
		t.Errorf("store.Get within TTL + window = %v; want the entry", err)
	}
	advance(time.Second)
	if _, err := store.Get(ctx, name); err == nil {
		t.Error("store.Get past TTL + window found the entry; want it expired")
	}
}

// redisEntry decodes an entry read from Redis.
func redisEntry(t *testing.T, get *redis.StringCmd) *cache.Entry {
	t.Helper()
	b, err := get.Bytes()
	if err != nil {
		t.Fatalf("redis GET: %v", err)
	}
	e, err := cache.Unmarshal(b)
	if err != nil {
		t.Fatalf("stored entry: %v", err)
	}
	return e
}

// upstreamControl sits in front of the mock model and decides, per test
// step, what the upstream does: answer as the mock does, answer new
// content, fail (500, 429, 404) or drop the connection, optionally after
// being held until released. It counts every upstream request.
type upstreamControl struct {
	mode  atomic.Value // string: "", "new", "500", "429", "404", "drop"
	hold  atomic.Pointer[chan struct{}]
	calls atomic.Int64
}

const refreshedContent = "the refreshed answer"

func (u *upstreamControl) set(mode string) { u.mode.Store(mode) }

func (u *upstreamControl) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasPrefix(r.URL.Path, "/v1/chat/") {
			next.ServeHTTP(w, r)
			return
		}
		u.calls.Add(1)
		if ch := u.hold.Load(); ch != nil {
			select {
			case <-*ch:
			case <-r.Context().Done():
				return
			}
		}
		mode, _ := u.mode.Load().(string)
		w.Header().Set("Content-Type", "application/json")
		switch mode {
		case "new":
			_, _ = io.WriteString(w, `{"id":"chatcmpl-new","object":"chat.completion","created":1735689600,"model":"gpt-4o-mini",`+
				`"choices":[{"index":0,"message":{"role":"assistant","content":"`+refreshedContent+`"},"finish_reason":"stop"}],`+
				`"usage":{"prompt_tokens":3,"completion_tokens":3,"total_tokens":6}}`)
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)
		case "429":
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		case "404":
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"The model does not exist","type":"invalid_request_error","param":"model","code":"model_not_found"}}`)
		case "drop":
			if hj, ok := w.(http.Hijacker); ok {
				if conn, _, err := hj.Hijack(); err == nil {
					_ = conn.Close()
				}
			}
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// waitFlights waits for every instance's flights, background refreshes
// included, to end.
func waitFlights(t *testing.T, h *harness) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, srv := range h.srvs {
		if err := srv.flights.Wait(ctx); err != nil {
			t.Fatalf("flights still running: %v", err)
		}
	}
}

// refreshes is the refreshes counted by every instance.
func refreshes(h *harness, tenantID string) float64 {
	var n float64
	for _, srv := range h.srvs {
		n += testutil.ToFloat64(srv.metrics.RefreshCounter(tenantID))
	}
	return n
}

// staleHarness is n gateways (sharing one real redis-server when dist is
// set, else embedded) on one injected clock, behind an upstreamControl,
// with staleTenant.
func staleHarness(t *testing.T, n int, dist bool) (*harness, *testClock, *upstreamControl) {
	clock, ctl := newTestClock(), &upstreamControl{}
	opt := func(o *harnessOptions) {
		o.tenants = []tenant.Spec{staleTenant}
		o.wrapUpstream = ctl.wrap
		rsrv := o.redis
		o.server = func(so *Options) {
			so.Now = clock.Now
			if rsrv != nil {
				so.Cache = cache.NewRedis(testRedisClient(t, rsrv), cache.RedisOptions{Now: clock.Now})
				return
			}
			mem := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
			t.Cleanup(func() { _ = mem.Close() })
			so.Cache = mem
		}
	}
	if dist {
		h, _ := distributed(t, n, opt)
		return h, clock, ctl
	}
	return newHarness(t, func(o *harnessOptions) { o.instances = n }, opt), clock, ctl
}

// testWhileRevalidate: 30 concurrent requests on an entry 30s past its
// TTL, over every instance, are all answered STALE with the old content
// while the upstream is held (none waits for it), and exactly one refresh
// call is made; once it is released, every instance answers HIT with the
// new content.
func testWhileRevalidate(t *testing.T, h *harness, clock *testClock, ctl *upstreamControl) {
	ctx := context.Background()
	body := chatBody("hot prompt")
	first := send(ctx, h.gws[0].URL, staleKey, body)
	if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("first: %d %s", first.status, first.header.Get("X-Corral-Cache"))
	}
	clock.Advance(time.Hour + 30*time.Second)
	ctl.set("new")
	release := make(chan struct{})
	ctl.hold.Store(&release)
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()

	done := make(chan []answer, 1)
	go func() { done <- burst(h.bases(), 30, staleKey, body) }()
	var answers []answer
	select {
	case answers = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("stale requests waited for the held upstream")
	}
	for i, a := range answers {
		if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
			t.Fatalf("answer %d: %d %s %q; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
		if cs := a.header.Get("Cache-Status"); cs != "corral; hit; fwd=stale; ttl=-30" {
			t.Errorf("answer %d Cache-Status = %q; want corral; hit; fwd=stale; ttl=-30", i, cs)
		}
		if age := a.header.Get("Age"); age != "3630" {
			t.Errorf("answer %d Age = %q; want 3630", i, age)
		}
	}
	close(release)
	released = true
	waitFlights(t, h)
	if n := ctl.calls.Load(); n != 2 {
		t.Errorf("upstream calls = %d; want 2 (the miss and exactly one refresh)", n)
	}
	if n := refreshes(h, "stale"); n != 1 {
		t.Errorf("refreshes counted = %v; want 1", n)
	}
	var saved float64
	for _, srv := range h.srvs {
		saved += testutil.ToFloat64(srv.metrics.TokensSavedCounter("stale", "stale"))
	}
	if want := float64(30 * (first.prompt() + first.completion())); saved != want || want == 0 {
		t.Errorf("tokens saved via stale = %v; want %v (30 answers)", saved, want)
	}
	for _, base := range h.bases() {
		a := send(ctx, base, staleKey, body)
		if a.header.Get("X-Corral-Cache") != cacheHit || !strings.Contains(a.body, refreshedContent) {
			t.Errorf("%s after the refresh: %s %q; want HIT with the new content", base, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := ctl.calls.Load(); n != 2 {
		t.Errorf("upstream calls after the hits = %d; want 2", n)
	}
}

func TestStaleWhileRevalidateDistributed(t *testing.T) {
	h, clock, ctl := staleHarness(t, 3, true)
	testWhileRevalidate(t, h, clock, ctl)
}

func TestStaleWhileRevalidateEmbedded(t *testing.T) {
	h, clock, ctl := staleHarness(t, 1, false)
	testWhileRevalidate(t, h, clock, ctl)
}

// TestStaleRefreshFailsTransiently: a refresh that gets a 500, a 429 or a
// dropped connection leaves the old entry serving STALE within the window,
// and no second refresh starts within the backoff; past both windows the
// request goes upstream and gets the failure.
func TestStaleRefreshFailsTransiently(t *testing.T) {
	h, clock, ctl := staleHarness(t, 3, true)
	ctx := context.Background()
	for _, mode := range []string{"500", "429", "drop"} {
		t.Run(mode, func(t *testing.T) {
			ctl.set("")
			body := chatBody("refresh fails with " + mode)
			first := send(ctx, h.gws[0].URL, staleKey, body)
			if first.status != 200 {
				t.Fatalf("first: %d", first.status)
			}
			clock.Advance(time.Hour + time.Minute)
			ctl.set(mode)
			before := ctl.calls.Load()
			for i, base := range h.bases() {
				a := send(ctx, base, staleKey, body)
				if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
					t.Fatalf("request %d: %d %s; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"))
				}
				waitFlights(t, h)
			}
			if n := ctl.calls.Load() - before; n < 1 || n > 2 {
				// One refresh; the upstream client may retry a dropped
				// connection once.
				t.Errorf("upstream calls during the window = %d; want one refresh", n)
			}
			if a := send(ctx, h.gws[1].URL, staleKey, body); a.header.Get("X-Corral-Cache") != cacheStale {
				t.Errorf("after the failed refresh: %s; want STALE", a.header.Get("X-Corral-Cache"))
			}
			// Past both windows (10m and 5m): the failure itself.
			clock.Advance(10 * time.Minute)
			a := send(ctx, h.gws[2].URL, staleKey, body)
			if a.status == 200 || a.header.Get("X-Corral-Cache") == cacheStale {
				t.Errorf("past the windows: %d %s; want the upstream failure", a.status, a.header.Get("X-Corral-Cache"))
			}
			waitFlights(t, h)
		})
	}
}

// TestStaleRefreshDeterministicFailure: a refresh answered 404 replaces
// the entry with the negative answer: the old entry stops serving.
func TestStaleRefreshDeterministicFailure(t *testing.T) {
	h, clock, ctl := staleHarness(t, 3, true)
	ctx := context.Background()
	body := chatBody("a retired model")
	if a := send(ctx, h.gws[0].URL, staleKey, body); a.status != 200 {
		t.Fatalf("first: %d", a.status)
	}
	clock.Advance(time.Hour + time.Minute)
	ctl.set("404")
	if a := send(ctx, h.gws[1].URL, staleKey, body); a.header.Get("X-Corral-Cache") != cacheStale {
		t.Fatalf("in the window: %s; want STALE", a.header.Get("X-Corral-Cache"))
	}
	waitFlights(t, h)
	for _, base := range h.bases() {
		a := send(ctx, base, staleKey, body)
		if a.status != http.StatusNotFound || a.header.Get("X-Corral-Cache") != cacheNegative {
			t.Errorf("%s after the 404 refresh: %d %s; want the 404 as NEGATIVE", base, a.status, a.header.Get("X-Corral-Cache"))
		}
	}
	// Once the negative entry has expired too, the old answer does not
	// come back.
	clock.Advance(time.Minute)
	ctl.set("")
	if a := send(ctx, h.gws[0].URL, staleKey, body); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("after the negative TTL: %d %s; want a MISS", a.status, a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleControls: no-cache, max-age=N and no-store never get a stale
// entry, nor does a tenant without the window.
func TestStaleControls(t *testing.T) {
	h, clock, _ := staleHarness(t, 3, true)
	ctx := context.Background()
	body := chatBody("controls")
	if a := send(ctx, h.gws[0].URL, staleKey, body); a.status != 200 {
		t.Fatalf("first: %d", a.status)
	}
	plain := chatBody("no window")
	send(ctx, h.gws[0].URL, acmeKey, plain)
	clock.Advance(time.Hour + time.Minute)
	for _, cc := range []string{"no-cache", "max-age=7200", "no-store"} {
		a := send(ctx, h.gws[1].URL, staleKey, body, "Cache-Control", cc)
		if a.status != 200 || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("Cache-Control: %s: %d %s; want no STALE", cc, a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	}
	if a := send(ctx, h.gws[2].URL, acmeKey, plain); a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("tenant without windows past the TTL: %s; want MISS", a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleStreamReplayed: a streaming request gets the stale entry
// replayed as an event stream.
func TestStaleStreamReplayed(t *testing.T) {
	h, clock, _ := staleHarness(t, 3, true)
	ctx := context.Background()
	if a := send(ctx, h.gws[0].URL, staleKey, chatBody("streamed stale")); a.status != 200 {
		t.Fatalf("first: %d", a.status)
	}
	clock.Advance(time.Hour + time.Second)
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"streamed stale"}]}`
	a := send(ctx, h.gws[1].URL, staleKey, stream)
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale ||
		!strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") || !strings.Contains(a.body, "data: [DONE]") {
		t.Errorf("stream: %d %s %s %q; want a STALE event stream", a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Content-Type"), a.body)
	}
	waitFlights(t, h)
}

const ifErrorKey = "sk-iferror-test-key"

// ifErrorTenant: stale_while_revalidate 1m, stale_if_error 1h past a 1h
// TTL.
var ifErrorTenant = tenant.Spec{ID: "iferror", KeySHA256: []string{tenant.HashKey(ifErrorKey)}, MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true,
	StaleWhileRevalidate: time.Minute, StaleIfError: time.Hour}

func ifErrorHarness(t *testing.T, n int, dist bool) (*harness, *testClock, *upstreamControl) {
	clock, ctl := newTestClock(), &upstreamControl{}
	opt := func(o *harnessOptions) {
		o.tenants = []tenant.Spec{ifErrorTenant}
		o.wrapUpstream = ctl.wrap
		rsrv := o.redis
		o.server = func(so *Options) {
			so.Now = clock.Now
			if rsrv != nil {
				so.Cache = cache.NewRedis(testRedisClient(t, rsrv), cache.RedisOptions{Now: clock.Now})
				return
			}
			mem := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
			t.Cleanup(func() { _ = mem.Close() })
			so.Cache = mem
		}
	}
	if dist {
		h, _ := distributed(t, n, opt)
		return h, clock, ctl
	}
	return newHarness(t, func(o *harnessOptions) { o.instances = n }, opt), clock, ctl
}

// testIfError: past stale_while_revalidate but within stale_if_error, a
// burst of concurrent requests over every instance goes upstream and,
// when the upstream fails transiently (500, 429, dropped connection), is
// answered with the old entry as STALE (coalesced followers too); past
// stale_if_error the failure itself comes back; a 404 passes through.
func testIfError(t *testing.T, h *harness, clock *testClock, ctl *upstreamControl) {
	ctx := context.Background()
	for _, mode := range []string{"500", "429", "drop"} {
		t.Run(mode, func(t *testing.T) {
			ctl.set("")
			body := chatBody("if error " + mode)
			first := send(ctx, h.gws[0].URL, ifErrorKey, body)
			if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
				t.Fatalf("first: %d %s", first.status, first.header.Get("X-Corral-Cache"))
			}
			clock.Advance(time.Hour + 2*time.Minute)
			ctl.set(mode)
			before := ctl.calls.Load()
			for i, a := range burst(h.bases(), 9, ifErrorKey, body) {
				if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || a.body != first.body {
					t.Fatalf("answer %d: %d %s %q; want STALE with the old content", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
				}
				if cs := a.header.Get("Cache-Status"); cs != "corral; hit; fwd=stale; ttl=-120" {
					t.Errorf("answer %d Cache-Status = %q; want corral; hit; fwd=stale; ttl=-120", i, cs)
				}
			}
			if n := ctl.calls.Load() - before; n < 1 {
				t.Errorf("upstream calls = %d; want the requests to have gone upstream", n)
			}
			waitFlights(t, h)
			// Past stale_if_error: the failure.
			clock.Advance(time.Hour)
			a := send(ctx, h.gws[len(h.gws)-1].URL, ifErrorKey, body)
			if a.status == 200 || a.header.Get("X-Corral-Cache") == cacheStale {
				t.Errorf("past stale_if_error: %d %s; want the failure", a.status, a.header.Get("X-Corral-Cache"))
			}
			waitFlights(t, h)
		})
	}
	t.Run("404", func(t *testing.T) {
		ctl.set("")
		body := chatBody("if error 404")
		if a := send(ctx, h.gws[0].URL, ifErrorKey, body); a.status != 200 {
			t.Fatalf("first: %d", a.status)
		}
		clock.Advance(time.Hour + 2*time.Minute)
		ctl.set("404")
		a := send(ctx, h.gws[len(h.gws)-1].URL, ifErrorKey, body)
		if a.status != http.StatusNotFound || a.header.Get("X-Corral-Cache") == cacheStale {
			t.Errorf("404 within stale_if_error: %d %s; want the 404", a.status, a.header.Get("X-Corral-Cache"))
		}
		waitFlights(t, h)
	})
}

func TestStaleIfErrorDistributed(t *testing.T) {
	h, clock, ctl := ifErrorHarness(t, 3, true)
	testIfError(t, h, clock, ctl)
}

func TestStaleIfErrorEmbedded(t *testing.T) {
	h, clock, ctl := ifErrorHarness(t, 1, false)
	testIfError(t, h, clock, ctl)
}

// TestStaleIfErrorNoCache: a no-cache request never gets the stale entry
// instead of a failure.
func TestStaleIfErrorNoCache(t *testing.T) {
	h, clock, ctl := ifErrorHarness(t, 1, false)
	ctx := context.Background()
	body := chatBody("no-cache fails")
	if a := send(ctx, h.gw.URL, ifErrorKey, body); a.status != 200 {
		t.Fatalf("first: %d", a.status)
	}
	clock.Advance(time.Hour + 2*time.Minute)
	ctl.set("500")
	if a := send(ctx, h.gw.URL, ifErrorKey, body, "Cache-Control", "no-cache"); a.status != http.StatusInternalServerError {
		t.Errorf("no-cache: %d %s; want the 500", a.status, a.header.Get("X-Corral-Cache"))
	}
}

// TestStaleStreamsEveryAPI: a streaming request for a stale entry gets it
// replayed as that API's event stream (Responses, Messages, legacy
// completions), and a streaming request in the stale_if_error window
// whose upstream fails before streaming gets the old entry as a stream.
func TestStaleStreamsEveryAPI(t *testing.T) {
	clock, ctl := newTestClock(), &upstreamControl{}
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{staleTenant, ifErrorTenant}
		o.wrapUpstream = ctl.wrap
		o.server = func(so *Options) {
			mem := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
			t.Cleanup(func() { _ = mem.Close() })
			so.Cache, so.Now = mem, clock.Now
		}
	})
	ctx := context.Background()
	apis := []struct {
		name, path, body, end string
		post                  func(ctx context.Context, url, key, body string, hdr ...string) answer
	}{
		{"responses", "/v1/responses", `{"model":"gpt-4o-mini","input":"stale responses"%s}`, "response.completed", func(ctx context.Context, url, key, body string, _ ...string) answer {
			return sendTo(ctx, url, key, body)
		}},
		{"messages", "/v1/messages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"stale messages"}]%s}`, "message_stop", postMessages},
		{"completions", "/v1/completions", `{"model":"gpt-4o-mini","prompt":"stale completions"%s}`, "data: [DONE]", func(ctx context.Context, url, key, body string, _ ...string) answer {
			return sendTo(ctx, url, key, body)
		}},
	}
	for _, api := range apis {
		t.Run(api.name, func(t *testing.T) {
			url := h.gw.URL + api.path
			plain, stream := fmt.Sprintf(api.body, ""), fmt.Sprintf(api.body, `,"stream":true`)
			if a := api.post(ctx, url, staleKey, plain); a.status != 200 {
				t.Fatalf("first: %d %s", a.status, a.body)
			}
			clock.Advance(time.Hour + time.Second)
			a := api.post(ctx, url, staleKey, stream)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale ||
				!strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") || !strings.Contains(a.body, api.end) {
				t.Errorf("stream: %d %s %s %q; want a STALE event stream ending with %s", a.status, a.header.Get("X-Corral-Cache"), a.header.Get("Content-Type"), a.body, api.end)
			}
			waitFlights(t, h)
		})
	}
	t.Run("if-error", func(t *testing.T) {
		ctl.set("")
		if a := send(ctx, h.gw.URL, ifErrorKey, chatBody("stream if error")); a.status != 200 {
			t.Fatalf("first: %d", a.status)
		}
		clock.Advance(time.Hour + 2*time.Minute)
		ctl.set("500")
		a := send(ctx, h.gw.URL, ifErrorKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"stream if error"}]}`)
		if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale || !strings.Contains(a.body, "data: [DONE]") {
			t.Errorf("stream in stale_if_error: %d %s %q; want a STALE event stream", a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	})
}

// prompt and completion are the usage an answer's JSON body reports.
func (a answer) prompt() int     { return a.usage().PromptTokens }
func (a answer) completion() int { return a.usage().CompletionTokens }

func (a answer) usage() (u struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
}) {
	var v struct {
		Usage *struct {
			PromptTokens     int `json:"prompt_tokens"`
			CompletionTokens int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if json.Unmarshal([]byte(a.body), &v) == nil && v.Usage != nil {
		u.PromptTokens, u.CompletionTokens = v.Usage.PromptTokens, v.Usage.CompletionTokens
	}
	return u
}
