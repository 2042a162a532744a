package server

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"slices"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/objects"
)

// handleAssignObject records that a tenant owns an object Corral did not
// see created (made before Corral was deployed, or elsewhere):
// PUT /admin/tenants/{id}/objects/{object_id}, body {"upstream":"<name>"}
// optional. An earlier owner is replaced: the operator's word is final.
func (s *Server) handleAssignObject(w http.ResponseWriter, r *http.Request) {
	id, obj := chi.URLParam(r, "id"), chi.URLParam(r, "object_id")
	t, ok := s.tenants.Load().Get(id)
	if !ok {
		writeError(w, errUnknownTenant(id))
		return
	}
	if obj == "" || len(obj) > objects.MaxIDLen {
		writeError(w, errInvalidRequest("The object id must be 1 to 256 characters.", "object_id"))
		return
	}
	var body struct {
		Upstream string `json:"upstream"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		writeError(w, errInvalidRequest(`The body must be empty or {"upstream":"<name>"}.`, ""))
		return
	}
	names := s.up.Names()
	if body.Upstream == "" && len(names) == 1 {
		body.Upstream = names[0]
	}
	if body.Upstream == "" {
		writeError(w, errInvalidRequest(`Several upstreams are configured: say which holds the object, {"upstream":"<name>"}.`, "upstream"))
		return
	}
	if !slices.Contains(names, body.Upstream) {
		writeError(w, errInvalidRequest("No upstream named "+jsonQuote(body.Upstream)+".", "upstream"))
		return
	}
	o := objects.Owner{Tenant: t.Scope, Upstream: body.Upstream}
	if err := s.objects.Assign(r.Context(), obj, o); err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errOwnershipUnavailable)
		return
	}
	writeJSON(w, map[string]string{"object": obj, "tenant": id, "upstream": body.Upstream})
}

// handleUnassignObject removes an ownership record:
// DELETE /admin/tenants/{id}/objects/{object_id}. A record held by another
// tenant is not touched (404), so a typo cannot strip the wrong owner.
func (s *Server) handleUnassignObject(w http.ResponseWriter, r *http.Request) {
	id, obj := chi.URLParam(r, "id"), chi.URLParam(r, "object_id")
	t, ok := s.tenants.Load().Get(id)
	if !ok {
		writeError(w, errUnknownTenant(id))
		return
	}
	owners, err := s.objects.Lookup(r.Context(), []string{obj})
	if err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errOwnershipUnavailable)
		return
	}
	if owners[0] == nil || owners[0].Tenant != t.Scope {
		writeError(w, errNoSuchObject(obj))
		return
	}
	if err := s.objects.Remove(r.Context(), obj); err != nil {
		recordFrom(r.Context()).err = err.Error()
		writeError(w, errOwnershipUnavailable)
		return
	}
	writeJSON(w, map[string]any{"object": obj, "tenant": id, "deleted": true})
}
