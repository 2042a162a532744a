// Package metrics defines Corral's Prometheus metrics in one place, so
// their names, help texts and label sets can be read (and kept bounded)
// together. Labels are tenant ids (bounded by the tenants file), endpoints,
// cache statuses, outcomes and model names; model names come from clients,
// so they pass through a guard bounded per tenant and in all. Keys, prompts and free-form text
// never become labels.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics holds every collector. A nil *Metrics is valid and records
// nothing, so tests and tools need not build one.
type Metrics struct {
	reg *prometheus.Registry

	requests        *prometheus.CounterVec   // tenant, endpoint, cache, code
	requestSeconds  *prometheus.HistogramVec // cache
	upstreamCalls   *prometheus.CounterVec   // tenant, model, outcome
	upstreamSeconds *prometheus.HistogramVec // outcome
	coalescedWait   *prometheus.HistogramVec // tenant
	lockTakeovers   prometheus.Counter
	refreshes       *prometheus.CounterVec // tenant
	rateLimited     *prometheus.CounterVec // tenant, kind
	tokens          *prometheus.CounterVec // tenant, model, type
	tokensSaved     *prometheus.CounterVec // tenant, via
	redisUp         prometheus.Gauge
	inflight        prometheus.Gauge
	streams         prometheus.Gauge

	models *guard
	up     *upstreamMetrics // nil until EnableUpstreams
	spend  *spendMetrics

	// Child collectors of the per-request series, looked up once per
	// label set instead of hashing the labels on every request.
	requestChildren children[requestLabels, requestChild]
	savedChildren   children[[2]string, prometheus.Counter] // tenant, via
	waitChildren    children[string, prometheus.Observer]   // tenant: a burst's waiters all observe one
}

// requestLabels are corral_requests_total's labels.
type requestLabels struct {
	tenant, endpoint, cache string
	code                    int
}

// requestChild is one request label set's series.
type requestChild struct {
	count   prometheus.Counter
	seconds prometheus.Observer
}

// maxChildren bounds each cache of child collectors. Label sets are
// bounded already (tenants come from the file, endpoints and cache values
// are Corral's, codes are HTTP's); the bound keeps a long run of reloads
// from growing the cache: past it, lookups go to the vector uncached.
const maxChildren = 4096

// children caches child collectors by their labels.
type children[K comparable, V any] struct {
	mu sync.RWMutex // protects m
	m  map[K]V
}

// get returns k's cached child.
func (c *children[K, V]) get(k K) (V, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	v, ok := c.m[k]
	return v, ok
}

// put caches k's child while the cache is under its bound.
func (c *children[K, V]) put(k K, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[K]V)
	}
	if len(c.m) < maxChildren {
		c.m[k] = v
	}
}

// Buckets for request and upstream latency: from a sub-millisecond hit to
// a two-minute generation.
var latencyBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}

// latencyHistogram is a histogram of durations in seconds over
// latencyBuckets, so every latency Corral exports can be compared bucket
// for bucket. It takes the opts literal (Buckets unset) rather than a name
// and help, so each metric's Name stays in a HistogramOpts, as
// internal/config's dashboard test reads it from this source.
func latencyHistogram(opts prometheus.HistogramOpts, labels ...string) *prometheus.HistogramVec {
	opts.Buckets = latencyBuckets
	return prometheus.NewHistogramVec(opts, labels)
}

// New registers Corral's metrics and the Go runtime and process metrics on
// a fresh registry.
func New() *Metrics {
	m := &Metrics{
		reg:   prometheus.NewRegistry(),
		spend: newSpendMetrics(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_requests_total", Help: "Requests answered, by tenant, endpoint, X-Corral-Cache value and HTTP status.",
		}, []string{"tenant", "endpoint", "cache", "code"}),
		requestSeconds: latencyHistogram(prometheus.HistogramOpts{
			Name: "corral_request_duration_seconds", Help: "Time to answer a request (to the end of a stream), by X-Corral-Cache value.",
		}, "cache"),
		upstreamCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_upstream_calls_total", Help: "Calls made to the upstream, by tenant, model and outcome (answer, deterministic, upstream_auth, transient, timeout, error, canceled).",
		}, []string{"tenant", "model", "outcome"}),
		upstreamSeconds: latencyHistogram(prometheus.HistogramOpts{
			Name: "corral_upstream_duration_seconds", Help: "Duration of upstream calls, by outcome.",
		}, "outcome"),
		coalescedWait: latencyHistogram(prometheus.HistogramOpts{
			Name: "corral_coalesced_wait_seconds", Help: "How long coalesced waiters waited for another request's answer; the count is the number of coalesced waiters.",
		}, "tenant"),
		lockTakeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "corral_lock_takeovers_total", Help: "Times a waiter found another instance's lock gone without an answer and led a new attempt.",
		}),
		refreshes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_stale_refreshes_total", Help: "Background refreshes started for entries served STALE (stale_while_revalidate), by tenant.",
		}, []string{"tenant"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_ratelimit_rejections_total", Help: "Requests refused by a rate limit, by tenant and limit kind (requests, tokens).",
		}, []string{"tenant", "kind"}),
		tokens: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_tokens_total", Help: "Tokens used upstream, by tenant, model and type (prompt, completion).",
		}, []string{"tenant", "model", "type"}),
		tokensSaved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_tokens_saved_total", Help: "Tokens not spent upstream because a request was a cache hit or was coalesced, by tenant and how (hit, coalesced, stale).",
		}, []string{"tenant", "via"}),
		redisUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_redis_up", Help: "1 when Redis answers (distributed mode), 0 while Corral serves degraded; absent in embedded mode.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_inflight_requests", Help: "Requests being served.",
		}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "corral_inflight_streams", Help: "Event streams open to clients.",
		}),
		models: newGuard(modelsPerTenant, maxModelSeries),
	}
	m.reg.MustRegister(m.requests, m.requestSeconds, m.upstreamCalls, m.upstreamSeconds, m.coalescedWait,
		m.lockTakeovers, m.refreshes, m.rateLimited, m.tokens, m.tokensSaved, m.inflight, m.streams,
		m.spend.cost, m.spend.saved, m.spend.remaining,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// EnableRedis adds corral_redis_up (distributed mode only).
func (m *Metrics) EnableRedis() {
	if m != nil {
		m.reg.MustRegister(m.redisUp)
		m.redisUp.Set(1)
	}
}

// CountLogDrops adds corral_log_lines_dropped_total, read from dropped
// (logsink.Sink.Dropped): log lines dropped because the log's reader fell
// behind and the sink's bound was reached, rather than stall requests.
func (m *Metrics) CountLogDrops(dropped func() uint64) {
	if m == nil || dropped == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
		Name: "corral_log_lines_dropped_total", Help: "Log lines dropped because the log's reader fell behind (the asynchronous log sink was full); requests never wait for the log.",
	}, func() float64 { return float64(dropped()) }))
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// Registry is the registry, for tests that read values.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Request records one answered request.
func (m *Metrics) Request(tenant, endpoint, cache string, code int, d time.Duration) {
	if m == nil {
		return
	}
	if cache == "" {
		cache = "NONE"
	}
	l := requestLabels{tenant, endpoint, cache, code}
	c, ok := m.requestChildren.get(l)
	if !ok {
		c = requestChild{
			count:   m.requests.WithLabelValues(tenant, endpoint, cache, strconv.Itoa(code)),
			seconds: m.requestSeconds.WithLabelValues(cache),
		}
		m.requestChildren.put(l, c)
	}
	c.count.Inc()
	c.seconds.Observe(d.Seconds())
}

// Upstream records one upstream call.
func (m *Metrics) Upstream(tenant, model, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.upstreamCalls.WithLabelValues(tenant, m.models.label(tenant, model), outcome).Inc()
	m.upstreamSeconds.WithLabelValues(outcome).Observe(d.Seconds())
}

// Coalesced records a waiter that got another request's answer.
func (m *Metrics) Coalesced(tenant string, waited time.Duration) {
	if m == nil {
		return
	}
	o, ok := m.waitChildren.get(tenant)
	if !ok {
		o = m.coalescedWait.WithLabelValues(tenant)
		m.waitChildren.put(tenant, o)
	}
	o.Observe(waited.Seconds())
}

// Refresh records a background refresh started for a stale entry.
func (m *Metrics) Refresh(tenant string) {
	if m != nil {
		m.refreshes.WithLabelValues(tenant).Inc()
	}
}

// RefreshCounter is the corral_stale_refreshes_total series.
func (m *Metrics) RefreshCounter(tenant string) prometheus.Counter {
	return m.refreshes.WithLabelValues(tenant)
}

// LockTakeover records a takeover from a dead or failed leader.
func (m *Metrics) LockTakeover() {
	if m != nil {
		m.lockTakeovers.Inc()
	}
}

// RateLimited records a refusal by the kind of limit ("requests", "tokens").
func (m *Metrics) RateLimited(tenant, kind string) {
	if m != nil {
		m.rateLimited.WithLabelValues(tenant, kind).Inc()
	}
}

// Tokens records tokens used upstream.
func (m *Metrics) Tokens(tenant, model string, prompt, completion int) {
	if m == nil || prompt+completion == 0 {
		return
	}
	label := m.models.label(tenant, model)
	m.tokens.WithLabelValues(tenant, label, "prompt").Add(float64(prompt))
	m.tokens.WithLabelValues(tenant, label, "completion").Add(float64(completion))
}

// TokensSaved records tokens a hit or a coalesced request did not spend.
func (m *Metrics) TokensSaved(tenant, via string, n int) {
	if m != nil && n > 0 {
		l := [2]string{tenant, via}
		c, ok := m.savedChildren.get(l)
		if !ok {
			c = m.tokensSaved.WithLabelValues(tenant, via)
			m.savedChildren.put(l, c)
		}
		c.Add(float64(n))
	}
}

// RedisUp sets the Redis gauge.
func (m *Metrics) RedisUp(up bool) {
	if m == nil {
		return
	}
	if up {
		m.redisUp.Set(1)
	} else {
		m.redisUp.Set(0)
	}
}

// InFlight adds delta to the in-flight request gauge.
func (m *Metrics) InFlight(delta float64) {
	if m != nil {
		m.inflight.Add(delta)
	}
}

// Streams adds delta to the open-stream gauge.
func (m *Metrics) Streams(delta float64) {
	if m != nil {
		m.streams.Add(delta)
	}
}

// Bounds of the model label. Model names come from clients; each tenant
// has its own budget of names, so one tenant's junk cannot use up the
// others', and the whole label has a cap of series.
const (
	// modelsPerTenant is how many distinct names one tenant's series may
	// carry; its later names are "other".
	modelsPerTenant = 50
	// maxModelSeries caps the (tenant, name) pairs in all, whatever the
	// number of tenants.
	maxModelSeries = 2000
)

// guard maps a tenant's model name to its label: the name itself while the
// tenant's budget and the global cap allow, "other" beyond. Configured
// names (KnownModels: the upstreams' exact model names, the tenants'
// allow-lists) are always their own label and use no budget: they are
// bounded by the operator's files, not by what clients send.
type guard struct {
	perTenant, max int

	mu    sync.Mutex                     // protects the fields below
	known map[string]bool                // configured names
	seen  map[string]map[string]struct{} // tenant → the client names it was given
	total int                            // pairs in seen
}

func newGuard(perTenant, max int) *guard {
	return &guard{perTenant: perTenant, max: max, seen: make(map[string]map[string]struct{})}
}

func (g *guard) label(tenant, v string) string {
	if v == "" {
		return "none"
	}
	if len(v) > 128 {
		return "other"
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.known[v] {
		return v
	}
	names := g.seen[tenant]
	if _, ok := names[v]; ok {
		return v
	}
	if len(names) >= g.perTenant || g.total >= g.max {
		return "other"
	}
	if names == nil {
		names = make(map[string]struct{})
		g.seen[tenant] = names
	}
	names[v] = struct{}{}
	g.total++
	return v
}

// setKnown replaces the configured names.
func (g *guard) setKnown(names []string) {
	known := make(map[string]bool, len(names))
	for _, n := range names {
		if n != "" && len(n) <= 128 && !strings.ContainsAny(n, "*?[\\") {
			known[n] = true // a glob names no one model
		}
	}
	g.mu.Lock()
	g.known = known
	g.mu.Unlock()
}

// KnownModels sets the model names the operator configured (the upstreams'
// models entries that are no globs, the tenants' allow-lists): they are
// always labelled by name and use no tenant's budget. Called at start and
// on every reload.
func (m *Metrics) KnownModels(names []string) {
	if m != nil {
		m.models.setKnown(names)
	}
}

// The accessors below expose single series for tests that read values.

// RequestsCounter is the corral_requests_total series for these labels.
func (m *Metrics) RequestsCounter(tenant, endpoint, cache string, code int) prometheus.Counter {
	return m.requests.WithLabelValues(tenant, endpoint, cache, strconv.Itoa(code))
}

// UpstreamCounter is the corral_upstream_calls_total series for these labels.
func (m *Metrics) UpstreamCounter(tenant, model, outcome string) prometheus.Counter {
	return m.upstreamCalls.WithLabelValues(tenant, model, outcome)
}

// RateLimitedCounter is the corral_ratelimit_rejections_total series.
func (m *Metrics) RateLimitedCounter(tenant, kind string) prometheus.Counter {
	return m.rateLimited.WithLabelValues(tenant, kind)
}

// TokensSavedCounter is the corral_tokens_saved_total series.
func (m *Metrics) TokensSavedCounter(tenant, via string) prometheus.Counter {
	return m.tokensSaved.WithLabelValues(tenant, via)
}
