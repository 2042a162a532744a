package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
)

// Upstreams is how the server reaches the model providers
// (failover.Router): by API and model, with failover before the first
// byte, or at one named upstream for a follow-up on an object it holds.
type Upstreams interface {
	Do(ctx context.Context, api, model string, req upstream.Request) (*http.Response, error)
	DoAt(ctx context.Context, name string, req upstream.Request) (*http.Response, error)
	// Names lists the upstreams in use.
	Names() []string
	// Primary names the first upstream of an API by priority.
	Primary(api string) string
	// CanTake reports whether Do would find an upstream for a model now.
	CanTake(api, model string) bool
}

var _ Upstreams = (*failover.Router)(nil)

// APIs a request may be routed to, named as the upstreams file names them
// and as ownership records know them.
const (
	apiOpenAI    = objects.OpenAI
	apiAnthropic = objects.Anthropic
)

// apiOf is the API a path below /v1 belongs to by the path alone: the
// cached endpoints' and the calls made for them. A proxied request's API
// is apiOfRequest's.
func apiOf(path string) string {
	if path == "/messages" || strings.HasPrefix(path, "/messages/") {
		return apiAnthropic
	}
	return apiOpenAI
}

// route is where one forwarded request goes: pin names the upstream that
// holds an object the request names ("" = none), api the API whose
// upstreams serve it ("" = the path's, apiOf), model is what routing by
// API and model reads ("" = any upstream of the API).
type route struct{ pin, api, model string }

// canTake reports whether a call routed to rt on endpoint's API would
// find an upstream to take it now. A pinned call always may (it bypasses
// the circuits).
func (s *Server) canTake(endpoint string, rt route) bool {
	if rt.pin != "" {
		return true
	}
	api := rt.api
	if api == "" {
		api = apiOf(endpoint)
	}
	return s.up.CanTake(api, rt.model)
}

// send routes one upstream call of the path's API: to pinned when the
// request names an object held there, else by API and model.
func (s *Server) send(ctx context.Context, pinned, model string, req upstream.Request) (*http.Response, error) {
	return s.sendRoute(ctx, route{pin: pinned, model: model}, req)
}

// sendRoute routes one upstream call where rt says. A call that does not
// say whose it is is the requesting tenant's: the router needs to know,
// so that one tenant's timeouts are not taken for an upstream's illness.
func (s *Server) sendRoute(ctx context.Context, rt route, req upstream.Request) (*http.Response, error) {
	if req.Tenant == "" {
		if t, ok := tenant.FromContext(ctx); ok {
			req.Tenant = t.ID
		}
	}
	if rt.pin != "" {
		return s.up.DoAt(ctx, rt.pin, req)
	}
	api := rt.api
	if api == "" {
		api = apiOf(req.Path)
	}
	return s.up.Do(ctx, api, rt.model, req)
}
