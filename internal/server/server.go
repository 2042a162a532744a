// Package server is Corral's HTTP surface and nothing else: the chi
// router, the edge middleware (request id, access log, recover, body
// limit), tenant authentication and limits, the handlers, the relays that
// write answers and streams to clients, and the one place where a typed
// error becomes a status and an error body (errors.go). The flight
// protocol (lead, wait, mirror, take over, call, classify, store, publish)
// is internal/coalesce's; what a body means is its wire format's
// (internal/wire). The server imports no Redis adapter: cmd/gateway wires
// them in.
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
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/breaker"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/lockout"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
	"github.com/corralhq/corral/internal/wire/anthropic"
	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/responses"
)

// Options wire a Server. Upstream, Tenants and Cache are required.
type Options struct {
	// Tenants is the initial registry; SetTenants swaps it live.
	Tenants *tenant.Registry
	// Upstream is the model provider client.
	Upstream *upstream.Client
	// Upstreams routes calls over several upstreams (internal/failover);
	// nil routes everything to Upstream, named "default".
	Upstreams Upstreams
	// Logger receives the access log and errors. Default: discard.
	Logger *slog.Logger
	// AccessLine, when set, writes the access log lines instead of
	// Logger's handler, in the same bytes at a fraction of the cost; it
	// must be the Encoder accessline.New returned with Logger (cmd/gateway
	// does this). Logger still decides the level of each line, and every
	// other line goes through it. Nil: access lines go through Logger too.
	AccessLine *accessline.Encoder
	// MaxBodyBytes is the request body limit (413 above it). Default 8 MiB.
	MaxBodyBytes int64
	// Ready reports readiness detail for /readyz; nil means always ready.
	Ready func() (ready bool, detail map[string]any)

	// Cache stores complete answers and remembered failures. Required.
	Cache Store
	// Distributed is true when Cache, Locker and Bus live in Redis; Redis
	// faults then degrade to in-process coalescing instead of failing.
	Distributed bool
	// Health is Redis's health, shared with the rate limiter (one breaker
	// per instance). Default in distributed mode: a breaker of the
	// server's own with RedisBackoff.
	Health *breaker.Breaker
	// Locker, Bus and Streams coordinate instances (coalesce/redisflight);
	// nil in embedded mode.
	Locker  coalesce.Locker
	Bus     coalesce.Bus
	Streams coalesce.Streams
	// Marker holds the refresh backoff of stale entries across instances
	// (coalesce/redisflight); nil keeps it in process.
	Marker coalesce.Marker
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
	// is probed again, when Health is nil. Default 1s.
	RedisBackoff time.Duration
	// Limiter enforces tenants' requests/min and tokens/min. Default: an
	// in-memory limiter (embedded mode).
	Limiter ratelimit.Limiter
	// Metrics records Prometheus metrics; nil records nothing and serves
	// no /metrics.
	Metrics *metrics.Metrics
	// Usage keeps per-tenant usage counters. Default: in memory.
	Usage UsageRecorder
	// Prices is the price catalog in force (a reload swaps it); nil or
	// empty prices nothing: costs are 0 and every call is unpriced.
	Prices *spend.Live
	// Budgets keeps tenants' spend against their budgets: in Redis in
	// distributed mode (spend.NewRedisLedger). Default: in process.
	Budgets *spend.Ledger
	// AdminToken enables /admin/* with this bearer token; empty disables
	// it. When set, /metrics (which carries tenant ids) needs it too.
	AdminToken string
	// Lockout throttles wrong admin tokens per client address on /admin,
	// /metrics and the console's sign-in (internal/lockout): a Fallback
	// on Redis when distributed. Default: in memory.
	Lockout lockout.Throttle
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
	// Tracing records the requests' spans (internal/telemetry); nil
	// traces nothing: no span is started, and a client's traceparent is
	// forwarded upstream as it came.
	Tracing trace.TracerProvider
	// TenantStore keeps the tenants and keys of the admin API
	// (internal/tenantstore); nil answers those routes with 503.
	TenantStore tenantstore.Store
	// ParsePolicy validates an API tenant's policy, a JSON object of
	// tenants-file fields, and returns it as the registry needs it; its
	// errors are *tenant.PolicyError. Required with TenantStore. It lives
	// with the tenants file's parser, so a new policy field reaches the
	// admin API with no change here.
	ParsePolicy func(doc []byte) (tenant.Policy, error)
	// Console configures the web console at /console/, on whenever
	// AdminToken is set.
	Console ConsoleOptions
	// Now is the clock. Default time.Now.
	Now func() time.Time
}

// Store is what the server needs from a cache backend (cache.Memory and
// cache.Redis): what the flight layer reads and writes, and the admin
// purges.
type Store interface {
	coalesce.Store
	Delete(ctx context.Context, keys ...string) error
	DeletePattern(ctx context.Context, pattern string) (int, error)
}

// UsageRecorder keeps per-tenant usage counters (internal/usage).
type UsageRecorder interface {
	Add(tenant string, c usage.Counters)
	Get(ctx context.Context, tenant string) (usage.Counters, error)
	// Days returns the per-day, per-model rows of tenants between two
	// UTC days, inclusive.
	Days(ctx context.Context, tenants []string, from, to time.Time) ([]usage.DayRow, error)
}

// Server handles Corral's HTTP requests.
type Server struct {
	up      Upstreams
	log     *slog.Logger
	logEnc  *accessline.Encoder // Options.AccessLine
	maxBody int64
	ready   func() (bool, map[string]any)
	ids     *requestIDs
	tenants atomic.Pointer[tenant.Registry]
	// sources are the registry's two halves, the file's and the store's
	// (admintenants.go).
	sources tenantSources
	handler http.Handler
	// direct are the cached model routes by exact path, each wrapped in
	// the same middleware chi would run (see routes): a POST to one of
	// them skips chi's route context, its tree walk and its path values.
	direct map[string]http.Handler

	cache      Store
	flights    *coalesce.Coalescer
	health     *breaker.Breaker // nil in embedded mode
	writeStall time.Duration    // see Options.WriteStall
	limiter    ratelimit.Limiter
	metrics    *metrics.Metrics
	usage      UsageRecorder
	prices     *spend.Live
	budgets    *spend.Ledger
	adminToken string
	lockout    lockout.Throttle // wrong admin tokens per client address
	reload     func() (*tenant.Registry, error)
	reloadMu   sync.Mutex   // serialises reloads
	splice     spliceMemory // which upstreams take the prepared streaming body
	replays    replays      // stored answers' stream renderings, shared by their readers
	objects    *objects.Registry
	tracer     trace.Tracer
	tracing    bool // Options.Tracing was set
	now        func() time.Time
	hour       hourRing        // this instance's last hour of requests by outcome, for the console
	stopped    context.Context // ends at Stop: open streams end with their error event
	stopNow    context.CancelFunc
}

// transient reports a call error after which a stale entry may be
// served (stale-if-error): a timeout, a connection error, or every
// candidate cooling down or with its circuit open.
func transient(err error) bool {
	switch upstream.KindOf(err) {
	case upstream.Connect, upstream.Timeout:
		return true
	}
	return errors.Is(err, failover.ErrNoneAvailable)
}

// New builds a Server.
func New(o Options) (*Server, error) {
	if (o.Upstream == nil && o.Upstreams == nil) || o.Tenants == nil || o.Cache == nil {
		return nil, errors.New("server: Upstream, Tenants and Cache are required")
	}
	s := &Server{
		up:         o.Upstreams,
		log:        cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		logEnc:     o.AccessLine,
		maxBody:    o.MaxBodyBytes,
		writeStall: cmp.Or(o.WriteStall, 30*time.Second),
		ready:      o.Ready,
		ids:        newRequestIDs(),
		cache:      o.Cache,
		health:     o.Health,
		limiter:    o.Limiter,
		metrics:    o.Metrics,
		usage:      o.Usage,
		prices:     o.Prices,
		budgets:    o.Budgets,
		adminToken: o.AdminToken,
		lockout:    o.Lockout,
		reload:     o.Reload,
		objects:    o.Objects,
		tracer:     telemetry.Tracer(o.Tracing),
		tracing:    o.Tracing != nil,
		now:        o.Now,
	}
	if s.objects == nil {
		s.objects = objects.NewRegistry(objects.NewMemory(0), objects.RegistryOptions{Logger: o.Logger})
	}
	if s.now == nil {
		s.now = time.Now
	}
	s.stopped, s.stopNow = context.WithCancel(context.Background())
	if s.usage == nil {
		s.usage = usage.NewMemoryAt(s.now)
	}
	if s.budgets == nil {
		s.budgets = spend.NewMemoryLedger(spend.LedgerOptions{Now: s.now})
	}
	if s.limiter == nil {
		s.limiter = ratelimit.NewMemory(ratelimit.MemoryOptions{})
	}
	if s.lockout == nil {
		s.lockout = lockout.NewMemory(lockout.MemoryOptions{Now: s.now})
	}
	if s.maxBody <= 0 {
		s.maxBody = 8 << 20
	}
	co := coalesce.Options{
		Store:             o.Cache,
		Caller:            caller{s},
		Observer:          observer{s},
		Locker:            o.Locker,
		Marker:            o.Marker,
		Transient:         transient,
		Render:            renderFailure,
		Bus:               o.Bus,
		Streams:           o.Streams,
		LockTTL:           o.LockTTL,
		PollInterval:      o.PollInterval,
		WaitTimeout:       o.WaitTimeout,
		FailOnWaitTimeout: o.FailOnWaitTimeout,
		LeaderWait:        o.LeaderWait,
		Tracer:            s.tracer,
		Now:               s.now,
	}
	if o.Distributed {
		if s.health == nil {
			s.health = breaker.New(breaker.Options{Backoff: o.RedisBackoff, Now: s.now, Logger: s.log, OnChange: s.metrics.RedisUp})
		}
		co.Health = s.health
	}
	flights, err := coalesce.New(co)
	if err != nil {
		return nil, err
	}
	s.flights = flights
	if s.up == nil {
		fo := failover.Options{Timeout: 24 * time.Hour}
		if s.tracing {
			fo.Tracer = s.tracer
		}
		s.up = failover.Single(defaultUpstream, "openai", o.Upstream, fo)
	}
	s.sources = tenantSources{store: o.TenantStore, parse: o.ParsePolicy, file: o.Tenants}
	if s.sources.store != nil && s.sources.parse == nil {
		return nil, errors.New("server: ParsePolicy is required with TenantStore")
	}
	s.tenants.Store(o.Tenants)
	h, err := s.routes(o.Console)
	if err != nil {
		return nil, err
	}
	s.handler = h
	return s, nil
}

// SetTenants swaps the tenants file's registry, keeping the API tenants;
// requests already authenticated keep the tenant they resolved.
func (s *Server) SetTenants(r *tenant.Registry) {
	s.sources.mu.Lock()
	s.sources.file = r
	gen := s.changedLocked()
	s.sources.mu.Unlock()
	s.rebuildThrough(gen)
}

// ServeHTTP implements http.Handler. A path is routed as the upstream will
// see it: one whose escapes spell only characters that mean the same
// encoded or not (/v1/chat/%63ompletions) is routed decoded, so it is the
// cached endpoint it names, with its limits, cache and coalescing; any
// other escaped path keeps its raw form, which only the proxy route
// matches, and the proxy refuses it (checkPath).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.RawPath != "" && plainEscapes(r.URL.RawPath) {
		r = decoded(r)
	}
	if r.Method == http.MethodPost && r.URL.RawPath == "" {
		if h, ok := s.direct[r.URL.Path]; ok {
			h.ServeHTTP(w, r)
			return
		}
	}
	s.handler.ServeHTTP(w, r)
}

// decoded is r with its path's escaped form dropped: the router then
// matches the decoded path.
func decoded(r *http.Request) *http.Request {
	c := r.WithContext(r.Context())
	u := *r.URL
	u.RawPath = ""
	c.URL = &u
	return c
}

// chain wraps h in mws, the first outermost, as chi's Use does.
func chain(h http.Handler, mws []func(http.Handler) http.Handler) http.Handler {
	for i := len(mws) - 1; i >= 0; i-- {
		h = mws[i](h)
	}
	return h
}

func (s *Server) routes(co ConsoleOptions) (http.Handler, error) {
	r := chi.NewRouter()
	// The edge and /v1 middleware, listed once: chi runs them for every
	// route, and the direct model routes (ServeHTTP) are wrapped in the
	// same lists, so a middleware added here reaches both.
	edge := []func(http.Handler) http.Handler{writeDeadline(s.writeStall), requestID(s.ids), s.traceRequests, s.countInFlight, accessLog(s.log, s.logEnc, s.observe), recoverer(s.log)}
	v1 := []func(http.Handler) http.Handler{bodyLimit(s.maxBody), s.authenticate, s.limitRequests}
	s.direct = map[string]http.Handler{}
	post := func(r chi.Router, path string, h http.HandlerFunc) {
		r.Post(path, h)
		s.direct["/v1"+path] = chain(chain(h, v1), edge)
	}
	r.Use(edge...)
	r.NotFound(handleUnknownPath)
	r.MethodNotAllowed(handleMethodNotAllowed)

	r.Get("/healthz", s.handleHealthz)
	r.Get("/readyz", s.handleReadyz)
	if s.metrics != nil {
		r.With(s.adminOnlyIfSet).Get("/metrics", s.metrics.Handler().ServeHTTP)
	}
	if s.adminToken != "" {
		r.Route("/admin", s.adminRoutes)
		if err := s.consoleRoutes(r, co); err != nil {
			return nil, err
		}
	}

	r.Route("/v1", func(r chi.Router) {
		r.Use(v1...)
		// One route per cached endpoint, each with its wire format: a new
		// API is a new format package and a line here.
		chat := openai.Format{}
		post(r, "/chat/completions", s.handleModelCall(chat, "/chat/completions"))
		post(r, "/completions", s.handleModelCall(chat, "/completions"))
		post(r, "/embeddings", s.handleModelCall(chat, "/embeddings"))
		post(r, "/responses", s.handleModelCall(responses.Format{}, "/responses"))
		post(r, "/messages", s.handleModelCall(anthropic.Format{}, "/messages"))
		r.Get("/models", s.handleModels)
		// Everything else under /v1 (files, batches, stored completions,
		// GET on the paths above...) is proxied untouched.
		r.HandleFunc("/*", s.handleProxy)
		r.MethodNotAllowed(s.handleProxy)
	})
	return r, nil
}

// RedisHealthy reports whether Redis answered the last time it was asked
// (always true in embedded mode).
func (s *Server) RedisHealthy() bool { return s.health.Healthy() }

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
func (s *Server) WaitFlights(ctx context.Context) error { return s.flights.Wait(ctx) }
