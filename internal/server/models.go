package server

import (
	"encoding/json"
	"net/http"

	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire/anthropic"
)

// handleModels lists the models the tenant may use. A tenant with an
// allow-list gets that list without an upstream call; a tenant without one
// gets the configuration's names when a cloud serves the API (a cloud's
// runtime API lists no models, and Azure's list names deployments, not
// what clients send), else the upstream's list.
func (s *Server) handleModels(w http.ResponseWriter, r *http.Request) {
	t, _ := tenant.FromContext(r.Context())
	if r.Header.Get("Anthropic-Version") != "" {
		s.anthropicModels(w, r, t)
		return
	}
	names := t.Models
	if names == nil {
		var fromConfig bool
		if names, fromConfig = s.up.ModelNames(apiOpenAI); !fromConfig {
			s.handleProxy(w, r)
			return
		}
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
	}{Object: "list", Data: make([]model, 0, len(names))}
	for _, m := range names {
		list.Data = append(list.Data, model{ID: m, Object: "model", OwnedBy: "corral"})
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

// anthropicModels answers GET /v1/models from an Anthropic client (it sends
// anthropic-version) in Anthropic's list shape: the allow-list, the
// configuration's names when a cloud serves Anthropic's API, or the list
// of the first anthropic upstream.
func (s *Server) anthropicModels(w http.ResponseWriter, r *http.Request, t *tenant.Tenant) {
	names := t.Models
	if names == nil {
		names, _ = s.up.ModelNames(apiAnthropic)
	}
	if names == nil {
		pin := s.up.Primary(apiAnthropic, "/models")
		if pin == "" {
			writeError(w, errNoAnthropicUpstream)
			return
		}
		s.forward(w, r, route{pin: pin}, upstream.Request{Method: http.MethodGet, Path: "/models", RawQuery: r.URL.RawQuery, Header: r.Header})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(anthropic.NewModelList(names, "1970-01-01T00:00:00Z"))
}

var errNoAnthropicUpstream = clientError(http.StatusNotFound, "model_not_found", "No upstream of this gateway serves Anthropic's API.")
