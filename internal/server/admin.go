package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/usage"
)

var hashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// adminRoutes are the operator's endpoints, behind the admin token.
func (s *Server) adminRoutes(r chi.Router) {
	r.Use(s.adminAuth)
	r.Get("/tenants/{id}/usage", s.handleUsage)
	r.Get("/usage", s.handleUsageDays)
	r.Delete("/cache/{tenant}", s.handlePurgeTenant)
	r.Delete("/cache/{tenant}/{key}", s.handlePurgeKey)
	r.Post("/reload", s.handleReload)
	r.Get("/tenants", s.handleListTenants)
	r.Post("/tenants", s.handleCreateTenant)
	r.Get("/tenants/{id}", s.handleGetTenant)
	r.Patch("/tenants/{id}", s.handlePatchTenant)
	r.Delete("/tenants/{id}", s.handleDeleteTenant)
	r.Get("/tenants/{id}/keys", s.handleListKeys)
	r.Post("/tenants/{id}/keys", s.handleCreateKey)
	r.Delete("/tenants/{id}/keys/{key_id}", s.handleRevokeKey)
	r.Get("/audit", s.handleAudit)
	r.Put("/tenants/{id}/objects/{object_id}", s.handleAssignObject)
	r.Delete("/tenants/{id}/objects/{object_id}", s.handleUnassignObject)
}

// adminAuth checks "Authorization: Bearer <CORRAL_ADMIN_TOKEN>" in
// constant time (comparing digests, so the token's length leaks nothing),
// and refuses every token from an address locked out for guessing.
func (s *Server) adminAuth(next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(s.adminToken))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token := bearerOnly(r)
		got := sha256.Sum256([]byte(token))
		wrong := subtle.ConstantTimeCompare(got[:], want[:]) != 1
		if token != "" && s.lockedOut(w, r, wrong) {
			return
		}
		if wrong {
			writeError(w, errAdminAuth)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// adminOnlyIfSet guards /metrics with the admin token when one is set:
// the metrics carry tenant ids. Without a token /metrics is open.
func (s *Server) adminOnlyIfSet(next http.Handler) http.Handler {
	if s.adminToken == "" {
		return next
	}
	return s.adminAuth(next)
}

func bearerOnly(r *http.Request) string {
	scheme, key, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(key)
}

var (
	errAdminAuth = clientError(http.StatusUnauthorized, "invalid_api_key", "Admin endpoints need 'Authorization: Bearer <CORRAL_ADMIN_TOKEN>'.")
	// errPurgeFailed answers a purge the cache store did not complete.
	errPurgeFailed = serverError(http.StatusServiceUnavailable, "purge_failed", "The purge did not complete (cache store unreachable); retry it.")
)

func errUnknownTenant(id string) *apiError {
	return clientError(http.StatusNotFound, "not_found", "No tenant with id "+jsonQuote(id)+".").withParam("tenant")
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// handleUsage answers a tenant's usage and savings counters.
func (s *Server) handleUsage(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	u, aerr := s.tenantUsage(r.Context(), id)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, struct {
		Tenant string `json:"tenant"`
		usageJSON
	}{id, u})
}

// errUsageUnavailable answers a read of the usage counters that failed.
var errUsageUnavailable = serverError(http.StatusServiceUnavailable, "usage_unavailable", "Usage counters are unavailable right now (Redis unreachable).")

// tenantUsage is tenant id's usage and savings counters and its standing
// against its budgets.
func (s *Server) tenantUsage(ctx context.Context, id string) (usageJSON, *apiError) {
	t, ok := s.tenants.Load().Get(id)
	if !ok {
		return usageJSON{}, errUnknownTenant(id)
	}
	c, err := s.usage.Get(ctx, t.Scope)
	if err != nil {
		recordFrom(ctx).err = err.Error()
		return usageJSON{}, errUsageUnavailable
	}
	// Budgets are read from the ledger's store (Redis when distributed):
	// without it, the last spend this instance read plus its own since.
	standing, _ := s.budgets.Read(ctx, t.Scope, t.Budget)
	return usageJSON{c.Requests, c.Hits, c.Coalesced, c.Negative, c.Bypass, c.UpstreamCalls, c.TokensUsed, c.TokensSaved,
		map[string]int64{cacheHit: c.Hits, cacheCoalesced: c.Coalesced, cacheNegative: c.Negative, cacheBypass: c.Bypass, cacheStale: c.Stale},
		spend.Nanodollars(c.CostNanos), spend.Nanodollars(c.SavedNanos), c.UnpricedCalls, byModelJSON(c.ByModel), budgetsJSON(standing)}, nil
}

// budgetJSON is one budget period's standing in a tenant's usage.
type budgetJSON struct {
	Period       string            `json:"period"`
	LimitUSD     spend.Nanodollars `json:"limit_usd"`
	SpentUSD     spend.Nanodollars `json:"spent_usd"`
	ReservedUSD  spend.Nanodollars `json:"reserved_usd"`
	RemainingUSD spend.Nanodollars `json:"remaining_usd"`
	ResetsAt     string            `json:"resets_at"`
}

// budgetsJSON lists a tenant's budgets; empty (not null) without any.
func budgetsJSON(st spend.Standing) []budgetJSON {
	out := make([]budgetJSON, 0, len(st))
	for _, p := range st {
		out = append(out, budgetJSON{p.Name, p.Limit, p.Spent, p.Reserved, p.Remaining(), p.ResetsAt.UTC().Format(time.RFC3339)})
	}
	return out
}

type usageJSON struct {
	Requests      int64            `json:"requests"`
	Hits          int64            `json:"hits"`
	Coalesced     int64            `json:"coalesced"`
	Negative      int64            `json:"negative"`
	Bypass        int64            `json:"bypass"`
	UpstreamCalls int64            `json:"upstream_calls"`
	TokensUsed    int64            `json:"tokens"`
	TokensSaved   int64            `json:"tokens_saved"`
	Cache         map[string]int64 `json:"cache"`
	// CostUSD is what the tenant's upstream calls cost, SavedUSD what its
	// HIT, STALE and COALESCED answers saved, at the price catalog's
	// prices; UnpricedCalls counts calls for models it has no price for.
	CostUSD       spend.Nanodollars         `json:"cost_usd"`
	SavedUSD      spend.Nanodollars         `json:"saved_usd"`
	UnpricedCalls int64                     `json:"unpriced_calls"`
	ByModel       map[string]modelUsageJSON `json:"by_model"`
	// Budgets is the tenant's standing against each budget period.
	Budgets []budgetJSON `json:"budgets"`
}

// modelUsageJSON is one model's part of a tenant's usage; models are named
// as they answered (usageModel; other: what no model answered).
type modelUsageJSON struct {
	Requests      int64             `json:"requests"`
	UpstreamCalls int64             `json:"upstream_calls"`
	InputTokens   int64             `json:"input_tokens"`
	OutputTokens  int64             `json:"output_tokens"`
	CostUSD       spend.Nanodollars `json:"cost_usd"`
	SavedUSD      spend.Nanodollars `json:"saved_usd"`
}

func byModelJSON(m map[string]usage.ModelCounters) map[string]modelUsageJSON {
	out := make(map[string]modelUsageJSON, len(m))
	for name, c := range m {
		out[name] = modelUsageJSON{c.Requests, c.UpstreamCalls, c.InputTokens, c.OutputTokens, spend.Nanodollars(c.CostNanos), spend.Nanodollars(c.SavedNanos)}
	}
	return out
}

// handlePurgeTenant removes every positive and negative entry of a tenant
// (SCAN + UNLINK in Redis, never KEYS). Locks and live streams are left
// alone: removing them would let a second leader start a duplicate call.
func (s *Server) handlePurgeTenant(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "tenant")
	if !keying.ValidTenantID(id) {
		writeError(w, errUnknownTenant(id))
		return
	}
	total, err := s.purgeTenant(r.Context(), s.scopeOf(id))
	if err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errPurgeFailed)
		return
	}
	writeJSON(w, map[string]int{"deleted": total})
}

// purgeTenant removes the positive and negative entries of a tenant's
// Scope and returns how many.
func (s *Server) purgeTenant(ctx context.Context, scope string) (int, error) {
	total := 0
	for _, kind := range []keying.Kind{keying.Response, keying.Negative} {
		n, err := s.cache.DeletePattern(ctx, keying.TenantPattern(scope)+"}:"+string(kind))
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}

// handlePurgeKey removes one prompt's positive and negative entries.
func (s *Server) handlePurgeKey(w http.ResponseWriter, r *http.Request) {
	id, hash := chi.URLParam(r, "tenant"), chi.URLParam(r, "key")
	if !keying.ValidTenantID(id) {
		writeError(w, errUnknownTenant(id))
		return
	}
	if !hashPattern.MatchString(hash) {
		writeError(w, errInvalidRequest("The key must be the prompt's sha256: 64 lowercase hex digits.", "key"))
		return
	}
	scope := s.scopeOf(id)
	names := []string{keying.Name(scope, hash, keying.Response), keying.Name(scope, hash, keying.Negative)}
	deleted := 0
	if es, err := s.cache.GetMany(r.Context(), names...); err == nil {
		for _, e := range es {
			if e != nil {
				deleted++
			}
		}
	}
	if err := s.cache.Delete(r.Context(), names...); err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errPurgeFailed)
		return
	}
	writeJSON(w, map[string]int{"deleted": deleted})
}

// handleReload re-reads the tenants file. A file that does not validate
// leaves the running tenants in place and the error is reported.
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	n, err := s.Reload()
	if err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errInvalidRequest("Reload refused; the running tenants are unchanged: "+err.Error(), ""))
		return
	}
	writeJSON(w, map[string]int{"tenants": n})
}

// Reload re-reads the tenants file and swaps the registry in; requests in
// flight keep the tenant they resolved. It returns the new tenant count.
func (s *Server) Reload() (int, error) {
	if s.reload == nil {
		return 0, errNoReload
	}
	s.reloadMu.Lock()
	defer s.reloadMu.Unlock()
	reg, err := s.reload()
	if err != nil {
		s.log.Error("tenants reload refused; keeping the running tenants", "error", err.Error())
		return 0, err
	}
	s.SetTenants(reg)
	s.log.Info("tenants reloaded", "tenants", reg.Len())
	return reg.Len(), nil
}

// TenantCount is the number of tenants of the running registry.
func (s *Server) TenantCount() int { return s.tenants.Load().Len() }

var errNoReload = errors.New("no tenants file to reload (CORRAL_TENANTS_FILE is empty)")
