package server

import (
	"context"
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
var staleTenant = tenant.Spec{ID: "stale", KeySHA256: []string{tenant.HashKey(staleKey)}, Policy: tenant.Policy{MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true,
	StaleWhileRevalidate: 10 * time.Minute, StaleIfError: 5 * time.Minute}}

// keepTenant has only stale_if_error (10m): its entries are kept past a
// 1h TTL but never answered at once.
var keepTenant = tenant.Spec{ID: "keep", KeySHA256: []string{tenant.HashKey(keepKey)}, Policy: tenant.Policy{MaxLeaders: 8,
	CacheTTL: time.Hour, NegativeTTL: 30 * time.Second, Cache: true, StaleIfError: 10 * time.Minute}}

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
	mode  atomic.Value // string: "", "new", "500", "429", "404", "error200", "drop"
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
		case "error200":
			_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)
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
	return clockedHarness(t, n, dist, staleTenant)
}

// inBothModes runs test on a clocked harness for spec twice: as three
// instances sharing a real Redis ("distributed") and as one instance with
// the memory cache ("embedded"), since the stale windows must hold in both.
func inBothModes(t *testing.T, spec tenant.Spec, test func(*testing.T, *harness, *testClock, *upstreamControl)) {
	for _, mode := range []struct {
		name string
		n    int
		dist bool
	}{{"distributed", 3, true}, {"embedded", 1, false}} {
		t.Run(mode.name, func(t *testing.T) {
			h, clock, ctl := clockedHarness(t, mode.n, mode.dist, spec)
			test(t, h, clock, ctl)
		})
	}
}

// eachTransientFailure runs test as one subtest per transient failure
// the upstream control injects (a 500, a 429, a dropped connection), each
// starting from a healthy upstream.
func eachTransientFailure(t *testing.T, ctl *upstreamControl, test func(t *testing.T, mode string)) {
	for _, mode := range []string{"500", "429", "drop"} {
		t.Run(mode, func(t *testing.T) {
			ctl.set("")
			test(t, mode)
		})
	}
}

// prime stores body's answer through base, failing the test unless it is
// a 200: the stale tests start from a stored entry.
func prime(t *testing.T, base, key, body string) {
	t.Helper()
	if a := send(context.Background(), base, key, body); a.status != 200 {
		t.Fatalf("first: %d", a.status)
	}
}

// clockedHarness is staleHarness for any tenant spec.
func clockedHarness(t *testing.T, n int, dist bool, spec tenant.Spec) (*harness, *testClock, *upstreamControl) {
	clock, ctl := newTestClock(), &upstreamControl{}
	opt := func(o *harnessOptions) {
		o.tenants = []tenant.Spec{spec}
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
