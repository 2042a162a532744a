package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// UpstreamState is one upstream's health at scrape time, and what it is.
type UpstreamState struct {
	Name     string
	API      string // openai, anthropic
	Provider string // openai, anthropic, azure, bedrock, vertex
	State    string // closed, cooling, open, half_open
}

// upstreamMetrics are the per-upstream collectors; names are bounded by
// the upstreams file.
type upstreamMetrics struct {
	attempts *prometheus.CounterVec   // upstream, outcome
	seconds  *prometheus.HistogramVec // upstream
	states   *stateCollector
}

// stateCollector reports every upstream's circuit state when scraped, so
// a cooldown that ran out shows at once, not at the next call, and its
// info series (what it is), so a reload that changes an upstream's
// provider shows at the next scrape.
type stateCollector struct {
	desc *prometheus.Desc
	info *prometheus.Desc

	mu   sync.Mutex // protects read
	read func() []UpstreamState
}

var upstreamStates = []string{"closed", "cooling", "open", "half_open"}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc; ch <- c.info }

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	read := c.read
	c.mu.Unlock()
	if read == nil {
		return
	}
	for _, u := range read() {
		ch <- prometheus.MustNewConstMetric(c.info, prometheus.GaugeValue, 1, u.Name, u.API, u.Provider)
		for _, s := range upstreamStates {
			v := 0.0
			if s == u.State {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, u.Name, s)
		}
	}
}

// EnableUpstreams registers the per-upstream metrics, reading states from
// read at every scrape (a reload swaps what read returns).
func (m *Metrics) EnableUpstreams(read func() []UpstreamState) {
	if m == nil {
		return
	}
	m.up = &upstreamMetrics{
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_upstream_attempts_total", Help: "Attempts at each upstream, by upstream and outcome (answer, retry, cooldown, error, timeout, canceled); failover makes several per call.",
		}, []string{"upstream", "outcome"}),
		seconds: latencyHistogram(prometheus.HistogramOpts{
			Name: "corral_upstream_attempt_duration_seconds", Help: "Time to each upstream's response headers (or failure), by upstream.",
		}, "upstream"),
		states: &stateCollector{
			desc: prometheus.NewDesc("corral_upstream_state", "1 for each upstream's current passive-health state (closed, cooling, open, half_open), 0 for the others.", []string{"upstream", "state"}, nil),
			// An info series, as Prometheus's own build_info: joined on
			// upstream, it adds the provider to any per-upstream series
			// without a label more on each of them.
			info: prometheus.NewDesc("corral_upstream_info", "1 for each configured upstream, naming its API (openai, anthropic) and provider (openai, anthropic, azure, bedrock, vertex).", []string{"upstream", "api", "provider"}, nil),
			read: read,
		},
	}
	m.reg.MustRegister(m.up.attempts, m.up.seconds, m.up.states)
}

// Attempt counts one attempt at an upstream (failover.Observer).
func (m *Metrics) Attempt(upstream, outcome string, d time.Duration) {
	if m == nil || m.up == nil {
		return
	}
	m.up.attempts.WithLabelValues(upstream, outcome).Inc()
	m.up.seconds.WithLabelValues(upstream).Observe(d.Seconds())
}
