// Package server is Corral's HTTP surface: the chi router, the edge
// middleware (request id, access log, recover, body limit), tenant
// authentication, and the handlers that run the request path of the
// design: authenticate, limit, key, look up, coalesce, call upstream,
// classify, store.
package server

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/coalesce/livestream"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

// Options wire a Server. Upstream and Tenants are required.
type Options struct {
	// Tenants is the initial registry; SetTenants swaps it live.
	Tenants *tenant.Registry
	// Upstream is the model provider client.
	Upstream *upstream.Client
	// Logger receives the access log and errors. Default: discard.
	Logger *slog.Logger
	// MaxBodyBytes is the request body limit (413 above it). Default 8 MiB.
	MaxBodyBytes int64
	// Ready reports readiness detail for /readyz; nil means always ready.
	Ready func() (ready bool, detail map[string]any)

	// Cache stores complete answers and remembered failures. Required.
	Cache Store
	// Distributed is true when Cache, Locker and Bus live in Redis; Redis
	// faults then degrade to in-process coalescing instead of failing.
	Distributed bool
	// Locker and Bus coordinate instances; nil in embedded mode.
	Locker Locker
	Bus    Bus
	// Streams carries live streams between instances; nil in embedded mode.
	Streams *livestream.Streams
	// LockTTL is the lock's TTL, which bounds how soon followers notice a
	// dead leader. Default 10s.
	LockTTL time.Duration
	// PollInterval is the waiters' safety-net poll. Default 50ms.
	PollInterval time.Duration
	// WaitTimeout is the longest a waiter waits for another instance's
	// call. Default 120s.
	WaitTimeout time.Duration
	// FailOnWaitTimeout answers 504 when WaitTimeout passes, instead of
	// calling upstream itself. Default false.
	FailOnWaitTimeout bool
	// LeaderWait bounds the wait for a tenant's leader semaphore before 429
	// tenant_concurrency_exceeded. Default 10s.
	LeaderWait time.Duration
	// RedisBackoff is how long Redis is skipped after a failure before it
	// is probed again. Default 1s.
	RedisBackoff time.Duration
	// Limiter enforces tenants' requests/min and tokens/min. Default: an
	// in-memory limiter (embedded mode).
	Limiter ratelimit.Limiter
	// Metrics records Prometheus metrics; nil records nothing and serves
	// no /metrics.
	Metrics *metrics.Metrics
	// Usage keeps per-tenant usage counters. Default: in memory.
	Usage UsageRecorder
	// AdminToken enables /admin/* with this bearer token; empty disables
	// it. When set, /metrics (which carries tenant ids) needs it too.
	AdminToken string
	// Reload re-reads the tenants file for POST /admin/reload and SIGHUP.
	// nil means reload is not available.
	Reload func() (*tenant.Registry, error)
	// WriteStall is how long one write of a response may block on a client
	// that does not read before the client is dropped; it applies to every
	// answer, streamed or not. Default 30s.
	WriteStall time.Duration
	// Objects records which tenant owns which stored object (files,
	// batches, stored responses, ...). Default: in memory, which a restart
	// forgets; cmd/gateway wires Redis or a bbolt file.
	Objects *objects.Registry
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Store is what the server needs from a cache backend (cache.Memory and
// cache.Redis): a prompt's positive and negative entries read together in
// one round trip, writes, and the admin purges.
type Store interface {
	GetMany(ctx context.Context, keys ...string) ([]*cache.Entry, error)
	Set(ctx context.Context, key string, e *cache.Entry, ttl time.Duration) error
	Delete(ctx context.Context, keys ...string) error
	DeletePattern(ctx context.Context, pattern string) (int, error)
}

var (
	_ Store = (*cache.Memory)(nil)
	_ Store = (*cache.Redis)(nil)
)

// UsageRecorder keeps per-tenant usage counters (internal/usage).
type UsageRecorder interface {
	Add(tenant string, c usage.Counters)
	Get(ctx context.Context, tenant string) (usage.Counters, error)
}

// Server handles Corral's HTTP requests.
type Server struct {
	up      *upstream.Client
	log     *slog.Logger
	maxBody int64
	ready   func() (bool, map[string]any)
	ids     *requestIDs
	tenants atomic.Pointer[tenant.Registry]
	handler http.Handler

	cache             Store
	locker            Locker
	bus               Bus
	streams           *livestream.Streams
	lockTTL           time.Duration
	redis             *breaker // nil in embedded mode
	groups            sync.Map // tenant id → *flightGroup
	pollInterval      time.Duration
	waitTimeout       time.Duration
	failOnWaitTimeout bool
	leaderWait        time.Duration
	writeStall        time.Duration // see Options.WriteStall
	limiter           ratelimit.Limiter
	metrics           *metrics.Metrics
	usage             UsageRecorder
	adminToken        string
	reload            func() (*tenant.Registry, error)
	reloadMu          sync.Mutex     // serialises reloads
	noSplice          atomic.Bool    // the upstream rejected stream_options once
	flights           sync.WaitGroup // flights running; they may outlive their requests
	objects           *objects.Registry
	now               func() time.Time
}

// New builds a Server.
func New(o Options) (*Server, error) {
	if o.Upstream == nil || o.Tenants == nil || o.Cache == nil {
		return nil, errors.New("server: Upstream, Tenants and Cache are required")
	}
	s := &Server{
		up:      o.Upstream,
		log:     o.Logger,
		maxBody: o.MaxBodyBytes,
		ready:   o.Ready,
		ids:     newRequestIDs(),

		cache:             o.Cache,
		locker:            o.Locker,
		bus:               o.Bus,
		streams:           o.Streams,
		lockTTL:           cmp.Or(o.LockTTL, 10*time.Second),
		pollInterval:      cmp.Or(o.PollInterval, 50*time.Millisecond),
		waitTimeout:       cmp.Or(o.WaitTimeout, 120*time.Second),
		failOnWaitTimeout: o.FailOnWaitTimeout,
		leaderWait:        cmp.Or(o.LeaderWait, 10*time.Second),
		writeStall:        cmp.Or(o.WriteStall, 30*time.Second),
		limiter:           o.Limiter,
		metrics:           o.Metrics,
		usage:             o.Usage,
		adminToken:        o.AdminToken,
		reload:            o.Reload,
		objects:           o.Objects,
		now:               o.Now,
	}
	if s.objects == nil {
		s.objects = objects.NewRegistry(objects.NewMemory(0), objects.RegistryOptions{Logger: o.Logger})
	}
	if s.usage == nil {
		s.usage = usage.NewMemory()
	}
	if s.limiter == nil {
		s.limiter = ratelimit.NewMemory(ratelimit.MemoryOptions{})
	}
	if s.now == nil {
		s.now = time.Now
	}

	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.maxBody <= 0 {
		s.maxBody = 8 << 20
	}
	if o.Distributed {
		s.redis = newBreaker(cmp.Or(o.RedisBackoff, time.Second), s.now, s.log)
		s.redis.onChange = s.metrics.RedisUp
	}
	s.tenants.Store(o.Tenants)
	s.handler = s.routes()
	return s, nil
}

// SetTenants swaps the tenant registry; requests already authenticated
// keep the tenant they resolved.
func (s *Server) SetTenants(r *tenant.Registry) { s.tenants.Store(r) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routes() http.Handler {
	r := chi.NewRouter()
	r.Use(writeDeadline(s.writeStall), requestID(s.ids), s.countInFlight, accessLog(s.log, s.observe), recoverer(s.log))
	r.NotFound(func(w http.ResponseWriter, _ *http.Request) { writeError(w, errNotFound) })
	r.MethodNotAllowed(func(w http.ResponseWriter, _ *http.Request) { writeError(w, errMethodNotAllowed) })

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	if s.metrics != nil {
		r.With(s.adminOnlyIfSet).Get("/metrics", s.metrics.Handler().ServeHTTP)
	}
	if s.adminToken != "" {
		r.Route("/admin", s.adminRoutes)
	}

	r.Route("/v1", func(r chi.Router) {
		r.Use(bodyLimit(s.maxBody), s.authenticate, s.limitRequests)
		r.Post("/chat/completions", s.handleModelCall("/chat/completions"))
		r.Post("/completions", s.handleModelCall("/completions"))
		r.Post("/embeddings", s.handleModelCall("/embeddings"))
		r.Get("/models", s.handleModels)
		// Everything else under /v1 (files, batches, stored completions,
		// GET on the paths above...) is proxied untouched.
		r.HandleFunc("/*", s.handleProxy)
		r.MethodNotAllowed(s.handleProxy)
	})
	return r
}

// RedisHealthy reports whether Redis answered the last time it was asked
// (always true in embedded mode).
func (s *Server) RedisHealthy() bool { return s.redis.healthy() }

// countInFlight keeps the in-flight request gauge.
func (s *Server) countInFlight(next http.Handler) http.Handler {
	if s.metrics == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.metrics.InFlight(1)
		defer s.metrics.InFlight(-1)
		next.ServeHTTP(w, r)
	})
}

// WaitFlights waits for flights still running after their clients left
// (a distributed leader finishes its call for waiters elsewhere), so a
// shutdown stores their answers and releases their locks before the Redis
// client closes. It gives up when ctx ends.
func (s *Server) WaitFlights(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		s.flights.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
