package server

import (
	"encoding/json"
	"net/http"

	"github.com/corralhq/corral/internal/tenant"
)

// handleModels lists the models the tenant may use. A tenant with an
// allow-list gets that list without an upstream call; a tenant without one
// gets the upstream's list.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	t, _ := tenant.FromContext(r.Context())
	if t.Models == nil {
		s.handleProxy(w, r)
		return
	}
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	list := struct {
		Object string  `json:"object"`
		Data   []model `json:"data"`
	}{Object: "list", Data: make([]model, 0, len(t.Models))}
	for _, m := range t.Models {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "corral"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}
