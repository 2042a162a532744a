package console

import (
	"context"
	"encoding/json"
	"strings"
	"time"
)

// Backend is what the console needs from the gateway. internal/server
// implements it with the same functions its admin JSON handlers call, so
// the console and the API cannot drift: a change made here is applied,
// announced and audited exactly as one made through /admin.
//
// The methods that change something take remote, the address the change
// came from, for the audit trail. Their errors are *Error when the
// gateway refused the change (the message is for people), anything else
// when it failed.
type Backend interface {
	Tenants(ctx context.Context) []Tenant
	Tenant(ctx context.Context, id string) (Tenant, error)
	// CreateTenant creates an API tenant with policy, a JSON object of
	// tenants-file fields (empty: the defaults).
	CreateTenant(ctx context.Context, remote, id string, policy []byte) error
	// PatchTenant applies a JSON merge patch to an API tenant's policy.
	PatchTenant(ctx context.Context, remote, id string, patch []byte) error
	DeleteTenant(ctx context.Context, remote, id string) error
	Keys(ctx context.Context, tenant string) ([]Key, error)
	CreateKey(ctx context.Context, remote, tenant, name string) (NewKey, error)
	RevokeKey(ctx context.Context, remote, tenant, keyID string) error
	// Purge removes a tenant's cached answers and returns how many.
	Purge(ctx context.Context, tenant string) (int, error)
	// Usage is the tenant's counters, as GET /admin/tenants/{id}/usage.
	Usage(ctx context.Context, tenant string) (Usage, error)
	// UsageDays is every tenant's rows between two UTC days, inclusive.
	// In distributed mode it reads a Redis hash per tenant and day.
	UsageDays(ctx context.Context, from, to time.Time) ([]DayRow, error)
	// TenantDays is one tenant's rows between two UTC days, inclusive: a
	// tenant's page reads its own days, not every tenant's.
	TenantDays(ctx context.Context, tenant string, from, to time.Time) ([]DayRow, error)
	// Audit is the newest admin events, newest first.
	Audit(ctx context.Context, limit int) ([]AuditEvent, error)
	// Upstreams is each upstream's health on this instance.
	Upstreams() []Upstream
	// FlightsInProgress counts this instance's upstream calls in flight.
	FlightsInProgress() int
	// LastHour is this instance's requests by outcome, per minute, oldest
	// first, 60 minutes ending with the current one.
	LastHour() (outcomes []string, minutes []Minute)
}

// Error is a change or a read the gateway refused, with its HTTP status
// and a message for people (the admin API's own message).
type Error struct {
	Status  int
	Code    string
	Message string
	// Param names the field at fault ("" when none).
	Param string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Text is the refusal as a page shows it: the message, and the field at
// fault when the message does not name it.
func (e *Error) Text() string {
	if e.Param == "" || strings.Contains(e.Message, e.Param) {
		return e.Message
	}
	return e.Message + " (field: " + e.Param + ")"
}

// Tenant is one tenant as the console shows it: never a key or its hash.
type Tenant struct {
	ID string
	// Source is "file" or "api".
	Source string
	// Policy is the policy as it was set (a JSON object).
	Policy json.RawMessage
	// Keys counts an API tenant's keys.
	Keys int
	// The running policy, normalised.
	RequestsPerMinute int64
	TokensPerMinute   int64
	MaxLeaders        int
	Models            []string
	Cache             bool
	CacheTTL          time.Duration
	// BudgetDayNanos and BudgetMonthNanos are its budgets; 0 = none.
	BudgetDayNanos   int64
	BudgetMonthNanos int64
}

// Key is one API key as listed: its prefix, never the key.
type Key struct {
	ID        string
	Name      string
	Prefix    string
	CreatedAt time.Time
	ExpiresAt *time.Time
	LastUsed  *time.Time
}

// NewKey is a key just made: the one time the key itself is shown.
type NewKey struct {
	ID   string
	Key  string
	Name string
}

// Usage is one tenant's counters, the figures of
// GET /admin/tenants/{id}/usage.
type Usage struct {
	Requests      int64
	Hits          int64
	Coalesced     int64
	Stale         int64
	Negative      int64
	Bypass        int64
	UpstreamCalls int64
	Tokens        int64
	TokensSaved   int64
	CostNanos     int64
	SavedNanos    int64
	UnpricedCalls int64
	ByModel       map[string]ModelUsage
	Budgets       []Budget
}

// ModelUsage is one model's part of a tenant's usage.
type ModelUsage struct {
	Requests      int64
	UpstreamCalls int64
	InputTokens   int64
	OutputTokens  int64
	CostNanos     int64
	SavedNanos    int64
}

// Budget is a tenant's standing in one budget period.
type Budget struct {
	Period         string
	LimitNanos     int64
	SpentNanos     int64
	ReservedNanos  int64
	RemainingNanos int64
	ResetsAt       time.Time
}

// DayRow is one tenant's usage of one model on one UTC day.
type DayRow struct {
	Tenant string
	Day    string
	Model  string
	ModelUsage
}

// AuditEvent is one admin change: never a key.
type AuditEvent struct {
	Time   time.Time
	Action string
	Tenant string
	KeyID  string
	Remote string
}

// Upstream is one upstream's health on this instance.
type Upstream struct {
	Name         string
	API          string
	Provider     string // openai, anthropic, azure, bedrock, vertex
	State        string // closed, cooling, open, half_open
	Failures     int    // the run counting toward the circuit
	OpenUntil    time.Time
	CoolingUntil time.Time
	Calls        int64
	Failed       int64
	LastFailure  time.Time
	Latency      time.Duration
}

// Minute is one minute's requests by outcome (LastHour's order).
type Minute struct {
	Start  time.Time
	Counts []int64
}
