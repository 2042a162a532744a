package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/corralhq/corral/internal/tenantstore"
)

// defaultAuditLimit is GET /admin/audit's page without ?limit.
const defaultAuditLimit = 100

// handleAudit answers the newest admin events: ?limit=N, 1 to 10,000.
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	limit := defaultAuditLimit
	if v := r.URL.Query().Get("limit"); v != "" || r.URL.Query().Has("limit") {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > tenantstore.AuditKept {
			writeError(w, errInvalidRequest("\"limit\" must be a whole number from 1 to 10000.", "limit"))
			return
		}
		limit = n
	}
	evs, aerr := s.auditEvents(r.Context(), limit)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, map[string]any{"events": evs})
}

// auditEvents is the newest limit admin events, newest first.
func (s *Server) auditEvents(ctx context.Context, limit int) ([]tenantstore.Event, *apiError) {
	if s.sources.store == nil {
		return nil, statusOfStore(errNoTenantStore, "")
	}
	evs, err := s.sources.store.Audit(ctx, limit)
	if err != nil {
		return nil, s.storeError(ctx, "", err)
	}
	return evs, nil
}

// TouchKeys writes the last use of the API keys used on this instance
// since the previous call; cmd/gateway runs it every 30 s, which keeps
// last_used to the minute. It returns the minute to pass next time.
func (s *Server) TouchKeys(ctx context.Context, since int64) (int64, error) {
	if s.sources.store == nil {
		return since, nil
	}
	now := s.now().Unix() / 60
	used := make(map[string]tenantstore.Use)
	latest := since
	for kid, u := range s.tenants.Load().Used(since) {
		used[kid] = tenantstore.Use{Tenant: u.Tenant, At: u.At}
		latest = max(latest, u.At.Unix()/60)
	}
	if len(used) == 0 {
		return since, nil
	}
	if err := s.sources.store.Touch(ctx, used); err != nil {
		return since, err
	}
	// The current minute may see more uses; written again next time.
	return min(latest, now-1), nil
}
