package server

import "github.com/corralhq/corral/internal/tenant"

// idOfScope is the tenant id of a tenant's Scope, what metrics are
// labelled with; the Scope is what its data is kept under.
var idOfScope = tenant.IDOfScope

// scopeOf is the Scope of the running tenant id, or id itself for one
// the registry does not hold (a tenant of the file under its plain id, or
// one gone: what an admin purge of it can still reach).
func (s *Server) scopeOf(id string) string {
	if t, ok := s.tenants.Load().Get(id); ok {
		return t.Scope
	}
	return id
}
