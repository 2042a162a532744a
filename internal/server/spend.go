package server

import (
	"net/http"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/usage"
	"github.com/corralhq/corral/internal/wire"
)

// pricedAnswer is a stored answer priced at today's prices.
type pricedAnswer struct {
	cost   spend.Nanodollars
	label  string // the catalog's name of the model, or spend.OtherModel
	priced bool
}

// priceEntry prices an answer's usage: the model the upstream answered
// with, else (absent from the answer, or without a price) the one the
// client asked for. A hit is priced the same way, from the usage its entry
// kept, so what it saved is what the call would cost today.
func (s *Server) priceEntry(e *entry.Entry, requested string) pricedAnswer {
	if e == nil || e.Status != http.StatusOK {
		return pricedAnswer{label: spend.OtherModel}
	}
	cat := s.prices.Load()
	p, ok := cat.Lookup(e.Model)
	if !ok {
		p, ok = cat.Lookup(requested)
	}
	if !ok {
		return pricedAnswer{label: spend.OtherModel}
	}
	u := spend.Usage{Input: e.PromptTokens, CachedInput: e.CachedTokens, CacheWrite: e.CacheWriteTokens, Output: e.CompletionTokens}
	return pricedAnswer{cost: p.Cost(u), label: p.Model, priced: true}
}

// chargeCall counts one upstream call that answered e: its cost, or an
// unpriced call, in the usage counters and the cost metric.
func (s *Server) chargeCall(tenant, requested string, e *entry.Entry) spend.Nanodollars {
	c := s.callCounters(tenant, requested, e)
	s.usage.Add(tenant, c)
	return spend.Nanodollars(c.CostNanos)
}

// chargeBypass counts what a BYPASS call's answer used and cost, read
// from the answer as it was relayed (u.Known false: an answer that showed
// no usage, counted as an upstream call only). The call itself is counted
// where every forwarded call is (countForwarded).
func (s *Server) chargeBypass(tenant, requested string, u wire.Usage) spend.Nanodollars {
	if !u.Known {
		return 0
	}
	c := s.callCounters(tenant, requested, &entry.Entry{Status: http.StatusOK, Model: u.Model, PromptTokens: u.Prompt,
		CompletionTokens: u.Completion, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite})
	c.UpstreamCalls = 0
	s.usage.Add(tenant, c)
	return spend.Nanodollars(c.CostNanos)
}

// callCounters are one upstream call's usage counters, and its cost in the
// cost metric.
func (s *Server) callCounters(tenant, requested string, e *entry.Entry) usage.Counters {
	c := usage.Counters{UpstreamCalls: 1}
	label := spend.OtherModel
	if e != nil {
		c.TokensUsed = int64(e.PromptTokens + e.CompletionTokens)
		if e.Status == http.StatusOK {
			pa := s.priceEntry(e, requested)
			label = pa.label
			c.CostNanos = int64(pa.cost)
			if !pa.priced {
				c.UnpricedCalls = 1
			}
			s.metrics.Cost(idOfScope(tenant), label, int64(pa.cost))
		}
		c.ByModel = map[string]usage.ModelCounters{label: {
			UpstreamCalls: 1, InputTokens: int64(e.PromptTokens), OutputTokens: int64(e.CompletionTokens), CostNanos: c.CostNanos,
		}}
	}
	return c
}

// modelLabel is the catalog's name for a request's model, for the usage
// split by model.
func (s *Server) modelLabel(rec *logRecord) string {
	if rec.priceLabel != "" {
		return rec.priceLabel
	}
	return s.prices.Load().Label(rec.model)
}

// noteSaved records on a HIT, STALE or COALESCED request what its answer
// would have cost.
func (s *Server) noteSaved(rec *logRecord, e *entry.Entry) {
	pa := s.priceEntry(e, rec.model)
	rec.savedUSD, rec.priceLabel = pa.cost, pa.label
}
