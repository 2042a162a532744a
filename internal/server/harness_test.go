package server

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/breaker"
	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/redisflight"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

const (
	anthropicUpstreamKey = "sk-ant-upstream-secret"
	acmeKey              = "sk-acme-test-key"
	limitedKey           = "sk-limited-test-key"
	upstreamKey          = "sk-upstream-secret-key"
)

// harness is one or more gateway instances in front of one mock model,
// over real HTTP; with a Redis server they share it as separate processes
// would (each its own client, lock and bus).
type harness struct {
	mock *mockllm.Server
	up   *httptest.Server
	gw   *httptest.Server // the first instance
	srv  *Server          // the first instance
	gws  []*httptest.Server
	srvs []*Server

	mu   sync.Mutex // protects seen
	seen []http.Header
}

type harnessOptions struct {
	upstreamTimeout time.Duration
	maxBody         int64
	mock            mockllm.Options
	gate            chan struct{} // when set, every upstream request waits for it to close
	server          func(*Options)
	tenants         []tenant.Spec
	instances       int
	redis           *redistest.Server // distributed mode when set
	lockTTL         time.Duration
	negativeTTL     time.Duration
	logs            io.Writer // access and error logs (JSON, debug level); default discarded
	wrapUpstream    func(http.Handler) http.Handler
	anthropic       bool                            // the mock also serves as an anthropic upstream ("claude", key anthropicUpstreamKey in x-api-key)
	wrapListener    func(net.Listener) net.Listener // the gateways' listeners, when set
}

func newHarness(tb testing.TB, opts ...func(*harnessOptions)) *harness {
	tb.Helper()
	o := harnessOptions{upstreamTimeout: 10 * time.Second, instances: 1, lockTTL: 2 * time.Second, negativeTTL: 30 * time.Second}
	for _, f := range opts {
		f(&o)
	}
	h := &harness{}
	o.mock.OnRequest = func(r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Clone())
		h.mu.Unlock()
		if o.gate != nil {
			select {
			case <-o.gate:
			case <-r.Context().Done():
			}
		}
	}
	h.mock = mockllm.New(o.mock)
	var upHandler http.Handler = h.mock
	if o.wrapUpstream != nil {
		upHandler = o.wrapUpstream(h.mock)
	}
	h.up = httptest.NewServer(upHandler)
	tb.Cleanup(h.up.Close)

	reg, err := tenant.NewRegistry(append([]tenant.Spec{
		{ID: "acme", KeySHA256: []string{tenant.HashKey(acmeKey)}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: o.negativeTTL, Cache: true}},
		{ID: "limited", KeySHA256: []string{tenant.HashKey(limitedKey)}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: o.negativeTTL, Cache: true,
			Models: []string{"gpt-4o-mini", "text-embedding-3-small"}}},
	}, o.tenants...))
	if err != nil {
		tb.Fatal(err)
	}
	for range o.instances {
		up, err := upstream.New(upstream.Options{BaseURL: h.up.URL + "/v1", APIKey: upstreamKey, Timeout: o.upstreamTimeout})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(up.CloseIdleConnections)
		so := Options{Tenants: reg, Upstream: up, MaxBodyBytes: o.maxBody, PollInterval: 20 * time.Millisecond, Metrics: metrics.New()}
		if o.anthropic {
			claude, err := upstream.New(upstream.Options{BaseURL: h.up.URL + "/v1", APIKey: anthropicUpstreamKey, Auth: "x-api-key", Timeout: o.upstreamTimeout})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(claude.CloseIdleConnections)
			ms := []*pool.Member{{Name: "openai", API: "openai", Weight: 1}, {Name: "claude", API: "anthropic", Weight: 1}}
			so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}),
				Clients: map[string]failover.Doer{"openai": up, "claude": claude}}, failover.Options{Timeout: o.upstreamTimeout, NoHealth: true})
		}
		if o.logs != nil {
			so.Logger = slog.New(slog.NewJSONHandler(o.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		}
		if o.redis != nil {
			rdb := testRedisClient(tb, o.redis)
			// One breaker per instance, shared by the flight layer and the
			// rate limiter, as cmd/gateway wires it.
			health := breaker.New(breaker.Options{Backoff: 50 * time.Millisecond, OnChange: so.Metrics.RedisUp})
			parts := redisflight.New(rdb, redisflight.Options{LockTTL: o.lockTTL, Health: health})
			tb.Cleanup(func() { _ = parts.Close() })
			<-parts.Bus.Ready()
			so.Distributed = true
			so.Health = health
			rec := usage.NewRedis(rdb, usage.RedisOptions{Interval: time.Hour})
			tb.Cleanup(func() { _ = rec.Close() })
			so.Usage = rec
			so.Budgets = spend.NewRedisLedger(rdb, spend.LedgerOptions{})
			so.Cache = cache.NewRedis(rdb, cache.RedisOptions{})
			so.Locker, so.Bus, so.Streams, so.Marker = parts.Locker, parts.Bus, parts.Streams, parts.Marker
			so.LockTTL = o.lockTTL
			so.Limiter = ratelimit.NewFallback(ratelimit.NewRedis(rdb, ratelimit.RedisOptions{}),
				ratelimit.NewMemory(ratelimit.MemoryOptions{}), nopLogger(), ratelimit.FallbackOptions{Breaker: health})
			owners := objects.NewRegistry(objects.NewRedis(rdb, objects.RedisOptions{}), objects.RegistryOptions{})
			tb.Cleanup(owners.Close)
			so.Objects = owners
		} else {
			mem := cache.NewMemory(cache.MemoryOptions{})
			tb.Cleanup(func() { _ = mem.Close() })
			so.Cache = mem
		}
		if o.server != nil {
			o.server(&so)
		}
		srv, err := New(so)
		if err != nil {
			tb.Fatal(err)
		}
		gw := httptest.NewUnstartedServer(srv)
		if o.wrapListener != nil {
			gw.Listener = o.wrapListener(gw.Listener)
		}
		gw.Start()
		tb.Cleanup(gw.Close)
		h.srvs = append(h.srvs, srv)
		h.gws = append(h.gws, gw)
	}
	h.gw, h.srv = h.gws[0], h.srvs[0]
	return h
}

// withServer is a harness option that also applies f to every instance's
// Options, after whatever server option came before it.
func withServer(f func(*Options)) func(*harnessOptions) {
	return func(o *harnessOptions) {
		prev := o.server
		o.server = func(so *Options) {
			if prev != nil {
				prev(so)
			}
			f(so)
		}
	}
}

// testRedisClient is a client configured as cmd/gateway configures its own:
// fail fast, honour context deadlines.
func testRedisClient(tb testing.TB, srv *redistest.Server) *redis.Client {
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		tb.Fatal(err)
	}
	opt.DialTimeout = 500 * time.Millisecond
	opt.ReadTimeout = 500 * time.Millisecond
	opt.WriteTimeout = 500 * time.Millisecond
	opt.ContextTimeoutEnabled = true
	opt.MaxRetries = 1
	opt.DialerRetries = 1
	opt.PoolSize = 64
	rdb := redis.NewClient(opt)
	tb.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// bases are the instances' base URLs.
func (h *harness) bases() []string {
	var out []string
	for _, gw := range h.gws {
		out = append(out, gw.URL)
	}
	return out
}

// seenHeaders returns the request headers the upstream received.
func (h *harness) seenHeaders() []http.Header {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]http.Header(nil), h.seen...)
}

// groupFor is the tenant's flight group, for tests that count joins.
func (s *Server) groupFor(id string) coalesce.GroupStats { return s.flights.Group(id) }

var (
	_ Store = (*cache.Memory)(nil)
	_ Store = (*cache.Redis)(nil)
)
