package server

import (
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/tenant"
)

// authenticate resolves the tenant from "Authorization: Bearer <key>" or
// the "api-key" header that Azure-style SDKs send, and refuses the
// request with 401 otherwise.
func (s *Server) authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		t, ok := s.tenants.Load().AuthenticateAt(bearerKey(r), s.now())
		if !ok {
			if anthropicRoute(w) {
				writeError(w, errInvalidAnthropicKey)
			} else {
				writeError(w, errInvalidAPIKey)
			}
			return
		}
		rec := recordFrom(r.Context())
		rec.tenant, rec.scope = t.ID, t.Scope
		next.ServeHTTP(w, r.WithContext(tenant.NewContext(r.Context(), t)))
	})
}

func bearerKey(r *http.Request) string {
	if h := header(r.Header, "Authorization"); h != "" {
		scheme, key, ok := strings.Cut(h, " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(key)
		}
		return ""
	}
	if k := header(r.Header, "X-Api-Key"); k != "" {
		return strings.TrimSpace(k) // Anthropic's SDKs and agents
	}
	return strings.TrimSpace(header(r.Header, "Api-Key"))
}
