package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/anthropic"
	"github.com/corralhq/corral/internal/wire/openai"
)

// Upstreams is how the server reaches the model providers
// (failover.Router): by API and model, with failover before the first
// byte, or at one named upstream for a follow-up on an object it holds.
type Upstreams interface {
	Do(ctx context.Context, api, model string, req upstream.Request) (*http.Response, error)
	DoAt(ctx context.Context, name string, req upstream.Request) (*http.Response, error)
	// Names lists the upstreams in use.
	Names() []string
	// Primary names the first upstream of an API by priority that serves
	// a GET of path ("" when none does).
	Primary(api, path string) string
	// CanTake reports whether Do would find an upstream for a model now.
	CanTake(api, model string) bool
	// ModelNames lists the model names the configuration gives an API's
	// upstreams (alias keys, models that are no globs); fromConfig is
	// false, and the list is the upstream's to give, unless a cloud
	// upstream (azure, bedrock, vertex) serves the API.
	ModelNames(api string) (names []string, fromConfig bool)
	// AliasKey is the alias glob of the named upstream that model
	// matched ("" when none did), for pricing.
	AliasKey(upstream, model string) string
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
// An upstream 429's body is replaced with Corral's own (ownRateLimit),
// whichever path relays it.
func (s *Server) sendRoute(ctx context.Context, rt route, req upstream.Request) (*http.Response, error) {
	if req.Tenant == "" {
		if t, ok := tenant.FromContext(ctx); ok {
			req.Tenant = t.ID
		}
	}
	api := rt.api
	if api == "" {
		api = apiOf(req.Path)
	}
	var (
		resp *http.Response
		err  error
	)
	if rt.pin != "" {
		resp, err = s.up.DoAt(ctx, rt.pin, req)
	} else {
		resp, err = s.up.Do(ctx, api, rt.model, req)
	}
	if err == nil && resp.StatusCode == http.StatusTooManyRequests {
		ownRateLimit(resp, api)
	}
	return resp, err
}

// maxThrottledBody bounds what is read of an upstream 429's own body
// before it is dropped, so its connection can be reused.
const maxThrottledBody = 64 << 10

// ownRateLimit replaces the body of an upstream's 429 with Corral's own
// 429 in the API's shape (OpenAI's rate_limit_exceeded, Anthropic's
// rate_limit_error). The upstream accounts are Corral's and shared by
// every tenant: their bodies name the account's organisation and its
// limits and usage ("... in organization org-... Limit 200000, Used
// 199500"), which no tenant may read, as the same facts in headers are
// stripped (upstream.CopyResponseHeader). What helps the client retry is
// kept: Retry-After, retry-after-ms and the upstream's x-should-retry.
func ownRateLimit(resp *http.Response, api string) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxThrottledBody))
	_ = resp.Body.Close()
	var f wire.Format = openai.Format{}
	if api == apiAnthropic {
		f = anthropic.Format{}
	}
	body := f.ErrorBody(errUpstreamRateLimited.wire())
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Del("Content-Length")
	resp.Header.Del("Content-Encoding")
	resp.Header.Set("Content-Type", "application/json")
}
