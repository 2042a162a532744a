package metrics

import "github.com/prometheus/client_golang/prometheus"

// spendMetrics are the dollar series. Their model label is a name from
// the price catalog or "other" (internal/spend's Catalog.Label), never a
// client's model name, so their series are bounded by the tenants times
// the catalog.
type spendMetrics struct {
	cost      *prometheus.CounterVec // tenant, model
	saved     *prometheus.CounterVec // tenant, model
	remaining *prometheus.GaugeVec   // tenant, period

	savedChildren children[[2]string, prometheus.Counter] // tenant, model: one per hit otherwise
}

// nanosPerDollar turns nano-dollars into the dollars Prometheus shows.
const nanosPerDollar = 1e9

func newSpendMetrics() *spendMetrics {
	return &spendMetrics{
		cost: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_cost_usd_total", Help: "USD spent upstream at the price catalog's prices, by tenant and model (the catalog's name for it, or other).",
		}, []string{"tenant", "model"}),
		saved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "corral_saved_usd_total", Help: "USD not spent upstream because an answer was a cache hit, stale or coalesced, by tenant and model (the catalog's name for it, or other).",
		}, []string{"tenant", "model"}),
		remaining: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "corral_budget_remaining_usd", Help: "USD left of a tenant's budget for the current period (day, month), as this instance last read it.",
		}, []string{"tenant", "period"}),
	}
}

// Cost records nanos (nano-dollars) spent upstream by tenant on model, a
// label from the price catalog.
func (m *Metrics) Cost(tenant, model string, nanos int64) {
	if m == nil || nanos <= 0 {
		return
	}
	m.spend.cost.WithLabelValues(tenant, model).Add(float64(nanos) / nanosPerDollar)
}

// Saved records nanos (nano-dollars) a cached or coalesced answer saved
// tenant on model, a label from the price catalog.
func (m *Metrics) Saved(tenant, model string, nanos int64) {
	if m == nil || nanos <= 0 {
		return
	}
	l := [2]string{tenant, model}
	c, ok := m.spend.savedChildren.get(l)
	if !ok {
		c = m.spend.saved.WithLabelValues(tenant, model)
		m.spend.savedChildren.put(l, c)
	}
	c.Add(float64(nanos) / nanosPerDollar)
}

// BudgetRemaining sets what is left of tenant's budget for period (day,
// month), in nano-dollars.
func (m *Metrics) BudgetRemaining(tenant, period string, nanos int64) {
	if m == nil {
		return
	}
	m.spend.remaining.WithLabelValues(tenant, period).Set(float64(nanos) / nanosPerDollar)
}
