package server

import (
	"net/http"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/failover"
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
// with, else (absent from the answer, or without a price) the alias key
// of the answering upstream that the requested model matched (the
// operator's name for it: a cloud's deployment may answer with a name no
// price lists), else the one the client asked for. A hit is priced the
// same way, from the usage and upstream its entry kept, so what it saved
// is what the call would cost today.
func (s *Server) priceEntry(e *entry.Entry, requested string) pricedAnswer {
	if e == nil || e.Status != http.StatusOK {
		return pricedAnswer{label: spend.OtherModel}
	}
	cat := s.prices.Load()
	p, ok := cat.Lookup(e.Model)
	if !ok {
		if v := e.Header[failover.UpstreamHeader]; len(v) > 0 {
			p, ok = cat.Lookup(s.up.AliasKey(v[0], requested))
		}
	}
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
// unpriced call, in the usage counters and the cost metric. An answer
// whose usage was unread costs estimate (callCost).
func (s *Server) chargeCall(tenant, requested string, e *entry.Entry, estimate spend.Nanodollars) spend.Nanodollars {
	c := s.callCounters(tenant, requested, e, estimate)
	s.usage.Add(tenant, c)
	return spend.Nanodollars(c.CostNanos)
}

// callCost prices an upstream call's answer: its usage at today's prices,
// or, when its usage was unread (none came, or none Corral believes:
// wire.Count), estimate, the priced estimate its reservation held, so an
// answer never costs less than its estimate for want of a usage Corral
// can read.
func (s *Server) callCost(e *entry.Entry, requested string, estimate spend.Nanodollars) pricedAnswer {
	pa := s.priceEntry(e, requested)
	if e != nil && e.Status == http.StatusOK && e.UsageUnread && pa.priced {
		pa.cost = max(pa.cost, estimate)
	}
	return pa
}

// chargeBypass counts what a BYPASS call's answer used and cost, read
// from the answer as it was relayed; an answer whose usage is unknown
// (u.Known false: none came, or none Corral believes) costs estimate, the
// priced estimate its reservation holds. upstream is the one that answered
// (its alias key prices the call when the answer's model has no price).
// The call itself is counted where
// every forwarded call is (countForwarded).
func (s *Server) chargeBypass(tenant, requested, upstream string, u wire.Usage, estimate spend.Nanodollars) spend.Nanodollars {
	e := &entry.Entry{Status: http.StatusOK, Model: u.Model, PromptTokens: u.Prompt,
		CompletionTokens: u.Completion, CachedTokens: u.Cached, CacheWriteTokens: u.CacheWrite, UsageUnread: !u.Known}
	if upstream != "" {
		e.Header = map[string][]string{failover.UpstreamHeader: {upstream}}
	}
	c := s.callCounters(tenant, requested, e, estimate)
	c.UpstreamCalls = 0
	for name, m := range c.ByModel { // and in its row
		m.UpstreamCalls = 0
		c.ByModel[name] = m
	}
	s.usage.Add(tenant, c)
	return spend.Nanodollars(c.CostNanos)
}

// callCounters are one upstream call's usage counters, in the row of the
// model that answered it (usageModel; a call that failed is in other's),
// and its cost in the cost metric (labelled by the price catalog's name;
// callCost: estimate for an answer whose usage was unread).
func (s *Server) callCounters(tenant, requested string, e *entry.Entry, estimate spend.Nanodollars) usage.Counters {
	c := usage.Counters{UpstreamCalls: 1}
	row := usage.ModelCounters{UpstreamCalls: 1}
	if e != nil {
		c.TokensUsed = int64(e.PromptTokens + e.CompletionTokens)
		row.InputTokens, row.OutputTokens = int64(e.PromptTokens), int64(e.CompletionTokens)
		if e.Status == http.StatusOK {
			pa := s.callCost(e, requested, estimate)
			c.CostNanos = int64(pa.cost)
			if !pa.priced {
				c.UnpricedCalls = 1
			}
			s.metrics.Cost(idOfScope(tenant), pa.label, int64(pa.cost))
		}
		row.CostNanos = c.CostNanos
	}
	c.ByModel = map[string]usage.ModelCounters{usageModel(e, requested): row}
	return c
}

// modelLabel is the catalog's name for a request's model, for the metrics
// split by model (bounded by the catalog).
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
	rec.usageRow = usageModel(e, rec.model)
}
