package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/breaker"
	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/coalesce/redisflight"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/lockout"
	"github.com/corralhq/corral/internal/metrics"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/redact"
	"github.com/corralhq/corral/internal/server"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/telemetry/otlp"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

type gatewayOptions struct {
	// Demo serves the built-in mock model as upstream and adds the demo
	// tenant.
	Demo bool
	// CheckUpstream asks the upstream for GET /models once at start and
	// warns when it fails (run sets it; tests that wire a gateway to no
	// upstream at all leave it off).
	CheckUpstream bool
	Logger        *slog.Logger
	// AccessLine is Logger's own access-line encoder (accessline.New), set
	// by run; nil (tests with a logger of their own) logs access lines
	// through Logger.
	AccessLine *accessline.Encoder
	// Getenv reads the variables the upstreams file names for its keys.
	// Default os.LookupEnv.
	Getenv func(string) (string, bool)
	// LogDropped reads how many log lines the asynchronous log sink
	// dropped (corral_log_lines_dropped_total); nil exports no count.
	LogDropped func() uint64
	// Now is the server's clock (key expiry, ...). Default time.Now.
	Now func() time.Time
}

// gateway is a wired Corral: the HTTP handler plus what it owns.
type gateway struct {
	http.Handler
	srv     *server.Server
	traces  *otlp.Provider // nil when tracing is off
	closers []func()
}

// Close releases what the gateway owns, in reverse order of creation.
func (g *gateway) Close() {
	for i := len(g.closers) - 1; i >= 0; i-- {
		g.closers[i]()
	}
	g.closers = nil
}

// newGateway wires the parts from cfg. This is the only place that knows
// the whole configuration; each package gets its own options.
func newGateway(ctx context.Context, cfg config.Config, o gatewayOptions) (_ *gateway, err error) {
	log := o.Logger
	gw := &gateway{}
	defer func() {
		if err != nil {
			gw.Close() // release what was built before the failure
		}
	}()

	var extra []tenant.Spec // tenants not from the file (the demo tenant)
	if o.Demo {
		upURL, stop, err := startDemoUpstream(log)
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, stop)
		cfg.UpstreamURL, cfg.UpstreamAPIKey = upURL, ""
		extra = append(extra, tenant.Spec{
			ID:        DemoTenant,
			KeySHA256: []string{tenant.HashKey(DemoKey)},
			Policy: tenant.Policy{
				MaxLeaders:           config.DefaultMaxLeaders,
				CacheTTL:             cfg.CacheTTL,
				NegativeTTL:          cfg.NegativeTTL,
				StaleWhileRevalidate: cfg.StaleRevalidate,
				StaleIfError:         cfg.StaleIfError,
				Cache:                true,
			},
		})
	}
	var allowed []string // the tenants' allow-lists, for the metrics' model label
	loadRegistry := func() (*tenant.Registry, error) {
		specs, err := tenantSpecs(cfg)
		if err != nil {
			return nil, err
		}
		var models []string
		for _, sp := range specs {
			models = append(models, sp.Policy.Models...)
		}
		// Checked on every reload too: a reload must not bring in what a
		// start would refuse.
		if err := refuseDemoKey(cfg, specs); err != nil {
			return nil, err
		}
		reg, err := tenant.NewRegistry(append(specs, extra...))
		if err == nil {
			allowed = models
		}
		return reg, err
	}
	reg, err := loadRegistry()
	if err != nil {
		return nil, err
	}
	switch {
	case reg.Len() > 0:
	case cfg.TenantsFile != "":
		// Accepted, because the shipped tenants files (compose's, the Helm
		// chart's default) list none until the operator adds one; said
		// loudly at start, on every reload and in /readyz.
		log.Warn(noTenantsWarning, slog.String("file", cfg.TenantsFile))
	default:
		log.Warn("no tenants configured: every request will be refused with 401; set CORRAL_TENANTS_FILE or use -demo")
	}

	getenv := o.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	m := metrics.New()
	m.CountLogDrops(o.LogDropped)
	tp, err := otlp.New(ctx, otlp.Options{Getenv: getenv})
	if err != nil {
		return nil, err
	}
	var tracer trace.Tracer // nil: attempts are not traced
	if tp.Enabled() {
		tracer = telemetry.Tracer(tp.TracerProvider())
		// run flushes it within the shutdown's grace once the flights
		// have ended; this closer stops it on every other way out
		// (a wiring error, a test), a no-op after run's.
		gw.traces = tp
		grace := cfg.ShutdownTimeout
		gw.closers = append(gw.closers, func() {
			sctx, cancel := context.WithTimeout(context.Background(), grace)
			defer cancel()
			if err := tp.Shutdown(sctx); err != nil {
				log.Warn("tracing: spans not flushed at shutdown", slog.String("error", err.Error()))
			}
		})
		log.Info("tracing on", slog.String("protocol", tp.Protocol), slog.String("endpoint", redact.URL(tp.Endpoint)))
	}
	cl := &clouds{}
	router, reloadUpstreams, err := newRouter(cfg, getenv, cl, m, tracer, log, o.Demo)
	if err != nil {
		return nil, err
	}
	if o.CheckUpstream {
		gw.closers = append(gw.closers, cl.check(ctx, log))
	}
	m.KnownModels(knownModels(router, allowed))
	catalog, err := loadPrices(cfg, o.Demo)
	if err != nil {
		return nil, err
	}
	prices := spend.NewLive(catalog)
	if o.CheckUpstream && cfg.UpstreamsFile == "" {
		up, err := upstream.New(upstream.Options{BaseURL: cfg.UpstreamURL, APIKey: cfg.UpstreamAPIKey, Timeout: cfg.UpstreamTimeout})
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, checkUpstream(ctx, up, cfg.UpstreamURL, log))
	}
	so := server.Options{
		Tenants:           reg,
		Upstreams:         router,
		Logger:            log,
		AccessLine:        o.AccessLine,
		MaxBodyBytes:      int64(cfg.MaxBodyBytes),
		PollInterval:      cfg.PollInterval,
		WaitTimeout:       cfg.WaitTimeout,
		FailOnWaitTimeout: cfg.WaitTimeoutFail,
		LeaderWait:        cfg.LeaderWait,
		Metrics:           m,
		Tracing:           tp.TracerProvider(),
		AdminToken:        cfg.AdminToken,
		Console:           server.ConsoleOptions{SecureCookie: cfg.ConsoleSecureCookie},
		Prices:            prices,
		Now:               o.Now,
	}
	if cfg.TenantsFile != "" || reloadUpstreams != nil || cfg.PricesFile != "" {
		// A reload re-reads every file and swaps in none unless all
		// validate; calls already running finish on the upstreams they
		// started with.
		so.Reload = func() (*tenant.Registry, error) {
			var cat *spend.Catalog
			if cfg.PricesFile != "" {
				var err error
				if cat, err = loadPrices(cfg, o.Demo); err != nil {
					return nil, err
				}
			}
			var set *failover.Set
			if reloadUpstreams != nil {
				var err error
				if set, err = reloadUpstreams(); err != nil {
					return nil, err
				}
			}
			reg, err := loadRegistry()
			if err != nil {
				return nil, err
			}
			if reg.Len() == 0 {
				log.Warn(noTenantsWarning, slog.String("file", cfg.TenantsFile))
			}
			if set != nil {
				router.Swap(set)
			}
			if cat != nil {
				prices.Swap(cat)
			}
			m.KnownModels(knownModels(router, allowed))
			return reg, nil
		}
	}
	mode := "embedded"
	var objStore objects.Store
	var tstore tenantstore.Store
	var dur *durability // distributed mode: is Redis keeping durable state?
	if cfg.RedisURL != "" {
		mode = "distributed"
		rdb, err := newRedis(ctx, cfg.RedisURL, redisTopology{cluster: cfg.RedisCluster, sentinelMaster: cfg.RedisSentinelMaster}, log)
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, func() { _ = rdb.Close() })
		so.Metrics.EnableRedis()
		// One breaker for every Redis user of this instance (the flight
		// layer, the cache, the rate limiter): one outage, one log line,
		// one gauge. Its background probe (a PING a second, up or down)
		// keeps /readyz current within 3 s even when no request comes.
		health := breaker.New(breaker.Options{
			Logger:        log,
			OnChange:      so.Metrics.RedisUp,
			Probe:         func(ctx context.Context) error { return rdb.Ping(ctx).Err() },
			ProbeInterval: time.Second,
			ProbeTimeout:  500 * time.Millisecond,
		})
		gw.closers = append(gw.closers, runOwned(health.Run))
		dur = &durability{rdb: rdb, log: log}
		gw.closers = append(gw.closers, runOwned(dur.run))
		parts := redisflight.New(rdb, redisflight.Options{LockTTL: cfg.LockTTL, Logger: log, Health: health})
		gw.closers = append(gw.closers, func() { _ = parts.Close() })
		if cc, ok := rdb.(*redis.ClusterClient); ok {
			gw.closers = append(gw.closers, reloadClusterState(cc, clusterReload))
		}
		so.Distributed = true
		so.Health = health
		so.Cache = cache.NewRedis(rdb, cache.RedisOptions{})
		objStore = objects.NewRedis(rdb, objects.RedisOptions{})
		tstore = tenantstore.NewRedis(rdb, tenantstore.RedisOptions{})
		// A console sign-out is kept where every instance checks it.
		so.Console.Revocations = console.NewRedisRevocations(rdb, o.Now)
		so.Locker, so.Bus, so.Streams, so.Marker = parts.Locker, parts.Bus, parts.Streams, parts.Marker
		so.LockTTL = cfg.LockTTL
		rec := usage.NewRedis(rdb, usage.RedisOptions{Logger: log})
		gw.closers = append(gw.closers, func() { _ = rec.Close() })
		so.Usage = rec
		// Budgets: one script run per upstream call; spend made while
		// Redis is away is flushed once it answers again, even for a
		// tenant that makes no further call.
		ledger := spend.NewRedisLedger(rdb, spend.LedgerOptions{Hold: reservationHold(cfg)})
		so.Budgets = ledger
		gw.closers = append(gw.closers, runEvery(time.Second, time.Second, ledger.Flush))
		// Wrong admin tokens count per address across instances, and on
		// each instance's own while Redis does not answer.
		so.Lockout = lockout.NewFallback(lockout.NewRedis(rdb, lockout.RedisOptions{Timeout: 250 * time.Millisecond}),
			lockout.NewMemory(lockout.MemoryOptions{Now: o.Now}), health)
		so.Limiter = ratelimit.NewFallback(
			ratelimit.NewRedis(rdb, ratelimit.RedisOptions{Timeout: 250 * time.Millisecond}),
			ratelimit.NewMemory(ratelimit.MemoryOptions{}), log, ratelimit.FallbackOptions{Breaker: health})
	} else {
		mem := cache.NewMemory(cache.MemoryOptions{})
		gw.closers = append(gw.closers, func() { _ = mem.Close() })
		so.Cache = mem
		if cfg.AdminToken != "" {
			// Console sign-outs outlive a restart: a signed-out cookie
			// must never work again.
			rev, err := console.OpenBoltRevocations(cfg.DataDir, o.Now)
			if err != nil {
				return nil, err
			}
			gw.closers = append(gw.closers, func() { _ = rev.Close() })
			so.Console.Revocations = rev
		}
		// Spend and usage: each in its own bbolt file in the data dir, so
		// a restart neither re-grants a budget nor loses chargeback rows.
		ledger, closeLedger, err := spend.OpenBoltLedger(cfg.DataDir, spend.LedgerOptions{Now: o.Now, Hold: reservationHold(cfg)}, log)
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, func() { _ = closeLedger() })
		so.Budgets = ledger
		rec, err := usage.OpenBolt(cfg.DataDir, usage.BoltOptions{Now: o.Now, Logger: log})
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, func() { _ = rec.Close() })
		so.Usage = rec
	}
	// Stored-object ownership: in Redis in distributed mode, in a bbolt
	// file under CORRAL_DATA_DIR in embedded mode, so a restart forgets
	// no owner.
	if objStore == nil {
		b, err := objects.OpenBolt(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, func() { _ = b.Close() })
		objStore = b
		log.Info("stored-object ownership kept in the data dir", slog.String("path", filepath.Join(cfg.DataDir, objects.BoltFile)))
	}
	// API tenants and keys: in Redis in distributed mode, in their own
	// bbolt file next to objects.db in embedded mode.
	if tstore == nil {
		b, err := tenantstore.OpenBolt(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		gw.closers = append(gw.closers, func() { _ = b.Close() })
		tstore = b
	}
	so.TenantStore, so.ParsePolicy = tstore, policyParser(cfg)
	owners := objects.NewRegistry(objStore, objects.RegistryOptions{Logger: log})
	gw.closers = append(gw.closers, owners.Close)
	so.Objects = owners
	var srv *server.Server
	so.Ready = func() (bool, map[string]any) {
		detail := map[string]any{"mode": mode, "redis": "disabled", "tenants": srv.TenantCount(), "upstreams": readyUpstreams(router)}
		if detail["tenants"] == 0 {
			detail["warning"] = noTenantsWarning // still ready: the operator's file says so
		}
		if mode == "distributed" {
			detail["redis"] = "ok"
			if !srv.RedisHealthy() {
				detail["redis"] = "unreachable" // degraded, still serving
			}
			if w := dur.Warning(); w != "" {
				if prev, ok := detail["warning"].(string); ok {
					w = prev + "; " + w
				}
				detail["warning"] = w // still ready: the cache works
			}
		}
		return true, detail
	}
	srv, err = server.New(so)
	if err != nil {
		return nil, err
	}
	gw.Handler = srv
	gw.srv = srv
	// Every instance mirrors the store's tenants: loaded once before
	// serving, then kept current (pub/sub, resync every 10 s).
	mirror := tenantstore.NewMirror(tstore, srv.SetAPITenants, tenantstore.MirrorOptions{Logger: log})
	if err := mirror.Load(ctx); err != nil {
		log.Warn("api tenants: store unreachable at start; serving the file's tenants until it answers", slog.String("error", err.Error()))
	}
	gw.closers = append(gw.closers, runOwned(mirror.Run), runOwned(func(ctx context.Context) { touchKeys(ctx, srv, log) }))
	// With an upstreams file each upstream has its own line (logUpstreams)
	// and CORRAL_UPSTREAM_URL is ignored: naming it here would mislead.
	upstreamAttr := slog.String("upstream", redact.URL(cfg.UpstreamURL))
	if cfg.UpstreamsFile != "" && !o.Demo {
		upstreamAttr = slog.String("upstreams_file", cfg.UpstreamsFile)
	}
	log.Info("corral configured",
		slog.String("mode", mode),
		slog.Int("tenants", reg.Len()),
		upstreamAttr,
		slog.Bool("demo", o.Demo))
	return gw, nil
}

// touchKeys writes the API keys' last use every 30 s until ctx ends.
func touchKeys(ctx context.Context, srv *server.Server, log *slog.Logger) {
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	var since int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			next, err := srv.TouchKeys(ctx, since)
			if err != nil && ctx.Err() == nil {
				log.Debug("api keys: last use not written", slog.String("error", err.Error()))
			}
			since = next
		}
	}
}

// reservationHold is how long a budget reservation counts unless its call
// settles first: the longest a leader waits for its permit plus the
// upstream timeout (which bounds a call to its stream's last byte), and a
// margin. A reservation outlives a call only when its instance died.
func reservationHold(cfg config.Config) time.Duration {
	return cfg.LeaderWait + cfg.UpstreamTimeout + 5*time.Second
}

// noTenantsWarning is logged at start and on every reload, and shown in
// /readyz, while the tenants file lists no tenant.
const noTenantsWarning = "tenants file lists no tenants: every request will be refused with 401"

// knownModels are the model names the operator configured: the upstreams'
// models entries and the tenants' allow-lists (allowed). The metrics label
// them by name whoever sends them; the rest of what clients send is
// bounded per tenant.
func knownModels(r *failover.Router, allowed []string) []string {
	out := slices.Clone(allowed)
	for _, mb := range r.Current().Pool.Members() {
		out = append(out, mb.Models...)
	}
	return out
}

// runOwned runs loop in a goroutine until the returned stop is called;
// stop waits for it to return.
func runOwned(loop func(ctx context.Context)) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		loop(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// runEvery calls f every interval, each call under a deadline of bound
// (0: none but stop's), until the returned stop is called; stop waits for
// a call in progress to end. It is runOwned for the background jobs that
// only repeat one call on a ticker.
func runEvery(interval, bound time.Duration, f func(ctx context.Context)) (stop func()) {
	return runOwned(func(ctx context.Context) {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if bound <= 0 {
				f(ctx)
				continue
			}
			fctx, cancel := context.WithTimeout(ctx, bound)
			f(fctx)
			cancel()
		}
	})
}

// tenantSpecs reads the tenants file into registry specs, applying the
// process-wide defaults.
func tenantSpecs(cfg config.Config) ([]tenant.Spec, error) {
	if cfg.TenantsFile == "" {
		return nil, nil
	}
	tf, err := config.LoadTenants(cfg.TenantsFile)
	if err != nil {
		return nil, err
	}
	specs := make([]tenant.Spec, 0, len(tf.Tenants))
	for _, t := range tf.Tenants {
		s := specOf(cfg, t)
		for _, k := range t.Keys {
			s.KeySHA256 = append(s.KeySHA256, k.SHA256)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// specOf turns a tenants-file tenant (or an API tenant's policy, which
// config.ParsePolicy reads into the same type) into a registry spec,
// applying the process-wide defaults. Keys are the caller's.
func specOf(cfg config.Config, t config.TenantSpec) tenant.Spec {
	s := tenant.Spec{
		ID:  t.ID,
		Doc: t.PolicyJSON(),
		Policy: tenant.Policy{
			RequestsPerMinute:    t.RequestsPerMinute,
			TokensPerMinute:      t.TokensPerMinute,
			MaxLeaders:           t.Leaders(),
			Models:               t.Models,
			CacheTTL:             cfg.CacheTTL,
			NegativeTTL:          cfg.NegativeTTL,
			StaleWhileRevalidate: cfg.StaleRevalidate,
			StaleIfError:         cfg.StaleIfError,
			Cache:                t.Caches(),
			DenyObjects:          t.DeniesObjects(),
			Budget:               t.Budget(),
			AllowUnmetered:       t.AllowsUnmetered(),
		},
	}
	if t.CacheTTL != nil {
		s.CacheTTL = t.CacheTTL.Duration
	}
	if t.NegativeTTL != nil {
		s.NegativeTTL = t.NegativeTTL.Duration
	}
	if t.StaleWhileRevalidate != nil {
		s.StaleWhileRevalidate = t.StaleWhileRevalidate.Duration
	}
	if t.StaleIfError != nil {
		s.StaleIfError = t.StaleIfError.Duration
	}
	return s
}

// policyParser validates an API tenant's policy with the tenants file's
// rules and defaults.
func policyParser(cfg config.Config) func([]byte) (tenant.Policy, error) {
	return func(doc []byte) (tenant.Policy, error) {
		t, err := config.ParsePolicy(doc)
		if err != nil {
			var fe *config.FileError
			if errors.As(err, &fe) {
				return tenant.Policy{}, &tenant.PolicyError{Field: fe.Field, Problem: fe.Problem}
			}
			return tenant.Policy{}, err
		}
		return specOf(cfg, t).Policy, nil
	}
}

// refuseDemoKey stops a gateway whose tenants file accepts the public demo
// key while Corral holds a real upstream key: anyone who can reach the port
// would spend that key. -demo itself never gets here with a key (its
// upstream is the mock), and CORRAL_ALLOW_DEMO_KEY=true says the operator
// means it (a private test box, a keyless local model behind a key).
func refuseDemoKey(cfg config.Config, specs []tenant.Spec) error {
	if cfg.UpstreamAPIKey == "" || cfg.AllowDemoKey {
		return nil
	}
	demo := tenant.HashKey(DemoKey)
	for _, s := range specs {
		for _, h := range s.KeySHA256 {
			if strings.EqualFold(h, demo) {
				return fmt.Errorf("tenants file %s: tenant %q accepts the public demo key %s while an upstream key is set, so anyone who can reach the gateway could spend it: "+
					"give the tenant a key of its own (gateway keygen) or set CORRAL_ALLOW_DEMO_KEY=true", cfg.TenantsFile, s.ID, DemoKey)
			}
		}
	}
	return nil
}

// checkUpstream asks the upstream once, in the background, whether it
// answers GET /models, and logs a warning naming the URL when it does not.
// It is never fatal: the upstream may come up after Corral, and a gateway
// that refused to start would make that an outage. The returned stop
// cancels the check and waits for it.
func checkUpstream(ctx context.Context, up *upstream.Client, baseURL string, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := up.Check(ctx); err != nil && ctx.Err() == nil {
			log.Warn("upstream check failed; serving anyway",
				slog.String("upstream", redact.URL(baseURL)), slog.String("error", err.Error()))
			return
		}
		if ctx.Err() == nil {
			log.Info("upstream check passed", slog.String("upstream", redact.URL(baseURL)))
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// startDemoUpstream serves the mock model on a private loopback port and
// returns its base URL and a stop function.
func startDemoUpstream(log *slog.Logger) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, fmt.Errorf("demo: listen for the mock model: %w", err)
	}
	srv := &http.Server{Handler: mockllm.New(mockllm.Options{ChunkDelay: 40 * time.Millisecond}), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && err != http.ErrServerClosed {
			log.Error("demo mock model stopped", slog.Any("error", err))
		}
	}()
	stop := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		<-done
	}
	return "http://" + ln.Addr().String() + "/v1", stop, nil
}
