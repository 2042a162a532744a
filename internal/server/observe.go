package server

import (
	"time"

	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/usage"
)

// observe feeds one finished request into the metrics and the tenant's
// usage counters. Requests that never authenticated have no tenant and
// count only in the access log.
func (s *Server) observe(rec *logRecord, status int, d time.Duration) {
	if rec.tenant == "" {
		return
	}
	s.hour.add(s.now(), rec.cache)
	endpoint := rec.endpoint
	if endpoint == "" {
		endpoint = "proxy"
	}
	s.metrics.Request(rec.tenant, endpoint, rec.cache, status, d)
	c := usage.Counters{Requests: 1, TokensSaved: int64(rec.saved), SavedNanos: int64(rec.savedUSD)}
	// Every request is in one row by model, the one its answer names
	// (usageModel): the rows add up to the tenant's requests.
	c.ByModel = map[string]usage.ModelCounters{rec.row(): {Requests: 1, SavedNanos: int64(rec.savedUSD)}}
	if rec.model != "" {
		s.metrics.Saved(rec.tenant, s.modelLabel(rec), int64(rec.savedUSD))
	}
	switch rec.cache {
	case cacheHit:
		c.Hits = 1
		s.metrics.TokensSaved(rec.tenant, "hit", rec.saved)
	case cacheCoalesced:
		c.Coalesced = 1
		s.metrics.TokensSaved(rec.tenant, "coalesced", rec.saved)
	case cacheStale:
		c.Stale = 1
		s.metrics.TokensSaved(rec.tenant, "stale", rec.saved)
	case cacheNegative:
		c.Negative = 1
	case cacheBypass:
		c.Bypass = 1
	}
	s.usage.Add(rec.scope, c)
}

// row is the model of the usage row the request counts in: the model that
// answered it, or other when none did.
func (rec *logRecord) row() string {
	if rec.usageRow == "" {
		return spend.OtherModel
	}
	return rec.usageRow
}
