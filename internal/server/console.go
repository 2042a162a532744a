package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/pool"
)

// consoleBackend is the console's view of the server: each method calls
// the function the admin JSON handler of the same change or read calls,
// so a change made in the console is applied, announced, audited and
// refused exactly as through /admin.
type consoleBackend struct{ s *Server }

var _ console.Backend = consoleBackend{}

// snapshotter is an Upstreams that can show its health (failover.Router).
type snapshotter interface{ Snapshot() []pool.Snapshot }

// refusal is aerr as the console's error; nil stays a nil error.
func refusal(aerr *apiError) error {
	if aerr == nil {
		return nil
	}
	return &console.Error{Status: aerr.Status, Code: aerr.Code, Message: aerr.Message, Param: aerr.Param}
}

func (b consoleBackend) Tenants(context.Context) []console.Tenant {
	var out []console.Tenant
	for _, t := range b.s.listTenants() {
		out = append(out, b.tenant(t))
	}
	return out
}

func (b consoleBackend) tenant(t tenantJSON) console.Tenant {
	ct := console.Tenant{ID: t.ID, Source: string(t.Source), Policy: t.Policy, Keys: len(t.Keys)}
	if rt, ok := b.s.tenants.Load().Get(t.ID); ok {
		ct.RequestsPerMinute, ct.TokensPerMinute, ct.MaxLeaders = int64(rt.RequestsPerMinute), int64(rt.TokensPerMinute), rt.MaxLeaders
		ct.Models, ct.Cache, ct.CacheTTL = rt.Models, rt.Cache, rt.CacheTTL
		ct.BudgetDayNanos, ct.BudgetMonthNanos = int64(rt.Budget.Day), int64(rt.Budget.Month)
	}
	return ct
}

func (b consoleBackend) Tenant(ctx context.Context, id string) (console.Tenant, error) {
	t, aerr := b.s.getTenant(ctx, id)
	if aerr != nil {
		return console.Tenant{}, refusal(aerr)
	}
	return b.tenant(t), nil
}

// policyFields reads a console form's JSON object as the admin API reads
// a body.
func policyFields(doc []byte) (map[string]json.RawMessage, *apiError) {
	if len(doc) > adminBodyLimit {
		return nil, errAdminTooLarge
	}
	fields, ok := oneObject(doc)
	if !ok {
		return nil, errInvalidRequest("The policy must be one JSON object, such as {\"requests_per_minute\": 600}.", "")
	}
	return fields, nil
}

func (b consoleBackend) CreateTenant(ctx context.Context, remote, id string, policy []byte) error {
	fields, aerr := policyFields(policy)
	if aerr != nil {
		return refusal(aerr)
	}
	if _, ok := fields["id"]; ok {
		return refusal(errInvalidRequest("Give the id in its own field, not in the policy.", "id"))
	}
	raw, _ := json.Marshal(id)
	fields["id"] = raw
	_, aerr = b.s.createTenant(ctx, remote, fields)
	return refusal(aerr)
}

func (b consoleBackend) PatchTenant(ctx context.Context, remote, id string, patch []byte) error {
	fields, aerr := policyFields(patch)
	if aerr != nil {
		return refusal(aerr)
	}
	_, aerr = b.s.patchTenant(ctx, remote, id, fields)
	return refusal(aerr)
}

func (b consoleBackend) DeleteTenant(ctx context.Context, remote, id string) error {
	_, aerr := b.s.deleteTenant(ctx, remote, id)
	return refusal(aerr)
}

func (b consoleBackend) Keys(ctx context.Context, id string) ([]console.Key, error) {
	ks, aerr := b.s.listKeys(ctx, id)
	if aerr != nil {
		return nil, refusal(aerr)
	}
	out := make([]console.Key, len(ks))
	for i, k := range ks {
		out[i] = console.Key{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt, LastUsed: k.LastUsed}
	}
	return out, nil
}

func (b consoleBackend) CreateKey(ctx context.Context, remote, id, name string) (console.NewKey, error) {
	fields := map[string]json.RawMessage{}
	if name != "" {
		raw, _ := json.Marshal(name)
		fields["name"] = raw
	}
	k, aerr := b.s.createKey(ctx, remote, id, fields)
	if aerr != nil {
		return console.NewKey{}, refusal(aerr)
	}
	return console.NewKey{ID: k.ID, Key: k.Key, Name: k.Name}, nil
}

func (b consoleBackend) RevokeKey(ctx context.Context, remote, id, keyID string) error {
	return refusal(b.s.revokeKey(ctx, remote, id, keyID))
}

func (b consoleBackend) Purge(ctx context.Context, id string) (int, error) {
	if _, ok := b.s.tenants.Load().Get(id); !ok {
		return 0, refusal(errUnknownTenant(id))
	}
	n, err := b.s.purgeTenant(ctx, b.s.scopeOf(id))
	if err != nil {
		recordFrom(ctx).err = err.Error()
		return 0, refusal(errPurgeFailed)
	}
	return n, nil
}

// Usage reads one tenant's usage. The console reads many tenants' at once
// on one request, so the read does not note its failure in the request's
// log record (one record, not safe for concurrent writes): the page says
// which tenants' figures are missing instead.
func (b consoleBackend) Usage(ctx context.Context, id string) (console.Usage, error) {
	u, aerr := b.s.tenantUsage(context.WithValue(ctx, edgeKey{}, (*edge)(nil)), id)
	if aerr != nil {
		return console.Usage{}, refusal(aerr)
	}
	cu := console.Usage{Requests: u.Requests, Hits: u.Hits, Coalesced: u.Coalesced, Stale: u.Cache[cacheStale], Negative: u.Negative,
		Bypass: u.Bypass, UpstreamCalls: u.UpstreamCalls, Tokens: u.TokensUsed, TokensSaved: u.TokensSaved,
		CostNanos: int64(u.CostUSD), SavedNanos: int64(u.SavedUSD), UnpricedCalls: u.UnpricedCalls, ByModel: map[string]console.ModelUsage{}}
	for name, m := range u.ByModel {
		cu.ByModel[name] = modelUsage(m)
	}
	for _, bj := range u.Budgets {
		at, _ := time.Parse(time.RFC3339, bj.ResetsAt)
		cu.Budgets = append(cu.Budgets, console.Budget{Period: bj.Period, LimitNanos: int64(bj.LimitUSD), SpentNanos: int64(bj.SpentUSD),
			ReservedNanos: int64(bj.ReservedUSD), RemainingNanos: int64(bj.RemainingUSD), ResetsAt: at})
	}
	return cu, nil
}

func modelUsage(m modelUsageJSON) console.ModelUsage {
	return console.ModelUsage{Requests: m.Requests, UpstreamCalls: m.UpstreamCalls, InputTokens: m.InputTokens, OutputTokens: m.OutputTokens,
		CostNanos: int64(m.CostUSD), SavedNanos: int64(m.SavedUSD)}
}

func (b consoleBackend) UsageDays(ctx context.Context, from, to time.Time) ([]console.DayRow, error) {
	rows, aerr := b.s.usageDays(ctx, from, to)
	if aerr != nil {
		return nil, refusal(aerr)
	}
	out := make([]console.DayRow, len(rows))
	for i, r := range rows {
		out[i] = console.DayRow{Tenant: r.Tenant, Day: r.Day, Model: r.Model, ModelUsage: modelUsage(r.modelUsageJSON)}
	}
	return out, nil
}

func (b consoleBackend) TenantDays(ctx context.Context, id string, from, to time.Time) ([]console.DayRow, error) {
	t, ok := b.s.tenants.Load().Get(id)
	if !ok {
		return nil, refusal(errUnknownTenant(id))
	}
	rows, err := b.s.usage.Days(ctx, []string{t.Scope}, from, to)
	if err != nil {
		return nil, refusal(errUsageUnavailable)
	}
	out := make([]console.DayRow, len(rows))
	for i, r := range rows {
		c := r.ModelCounters
		out[i] = console.DayRow{Tenant: idOfScope(r.Tenant), Day: r.Day, Model: r.Model, ModelUsage: console.ModelUsage{Requests: c.Requests,
			UpstreamCalls: c.UpstreamCalls, InputTokens: c.InputTokens, OutputTokens: c.OutputTokens, CostNanos: c.CostNanos, SavedNanos: c.SavedNanos}}
	}
	return out, nil
}

func (b consoleBackend) Audit(ctx context.Context, limit int) ([]console.AuditEvent, error) {
	evs, aerr := b.s.auditEvents(ctx, limit)
	if aerr != nil {
		return nil, refusal(aerr)
	}
	out := make([]console.AuditEvent, len(evs))
	for i, e := range evs {
		out[i] = console.AuditEvent{Time: e.Time, Action: string(e.Action), Tenant: e.Tenant, KeyID: e.KeyID, Remote: e.Remote}
	}
	return out, nil
}

func (b consoleBackend) Upstreams() []console.Upstream {
	sn, ok := b.s.up.(snapshotter)
	if !ok {
		return nil
	}
	var out []console.Upstream
	for _, m := range sn.Snapshot() {
		out = append(out, console.Upstream{Name: m.Name, API: m.API, Provider: m.Provider, State: m.State.String(), Failures: m.Failures,
			OpenUntil: m.OpenUntil, CoolingUntil: m.CoolingUntil, Calls: m.Calls, Failed: m.Failed, LastFailure: m.LastFailure, Latency: m.Latency})
	}
	return out
}

func (b consoleBackend) FlightsInProgress() int { return b.s.flights.InFlight() }

func (b consoleBackend) LastHour() ([]string, []console.Minute) {
	mins := b.s.hour.lastHour(b.s.now())
	out := make([]console.Minute, len(mins))
	for i, m := range mins {
		out[i] = console.Minute{Start: m.Start, Counts: append([]int64(nil), m.Counts[:]...)}
	}
	return hourOutcomes[:], out
}

// consoleRoutes mounts the console at /console/ (only with an admin
// token: without one there is nothing to sign in with) and points / at
// it.
func (s *Server) consoleRoutes(r interface {
	Handle(string, http.Handler)
	Get(string, http.HandlerFunc)
}, o ConsoleOptions) error {
	c, err := console.New(console.Options{Backend: consoleBackend{s}, AdminToken: s.adminToken, SecureCookie: o.SecureCookie,
		Revocations: o.Revocations, Lockout: s.lockout, Logger: s.log, Now: s.now})
	if err != nil {
		return err
	}
	r.Handle(console.Prefix, c)
	r.Handle(console.Prefix+"/*", c)
	r.Get("/", c.Home().ServeHTTP)
	return nil
}

// ConsoleOptions configure the console (internal/console).
type ConsoleOptions struct {
	// SecureCookie marks the session cookie Secure on plain HTTP too
	// (CORRAL_CONSOLE_SECURE_COOKIE: behind a TLS-terminating proxy).
	SecureCookie bool
	// Revocations keeps signed-out sessions where every instance reads
	// them (Redis when distributed); nil keeps them in memory.
	Revocations console.Revocations
}
