package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/flight"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/anthropic"
	"github.com/corralhq/corral/internal/wire/openai"
)

// apiError is an error Corral itself answers with; the wire format
// renders it (OpenAI's {"error":{"message":...,"type":...,"param":...,
// "code":...}}).
type apiError struct {
	Status  int
	Type    string
	Code    string
	Message string
	Param   string // "" renders as null

	retryAfter time.Duration // 429: when to retry; 0 = one second
	neverFits  bool          // 429 for a request larger than the limit's burst: no retry can help, so no Retry-After
	noRetry    bool          // a retry cannot change the answer: x-should-retry: false
	budget     bool          // a budget refusal: 429 on the OpenAI APIs, 400 invalid_request_error on Messages
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func (e *apiError) wire() wire.Error {
	return wire.Error{Status: e.Status, Type: e.Type, Code: e.Code, Message: e.Message, Param: e.Param}
}

// errorFormat renders the errors of every route; all of today's routes
// speak OpenAI's API.
var errorFormat wire.Format = openai.Format{}

// Error types, as OpenAI names them. Which one an error carries follows
// from whose fault it is, so clientError and serverError set it.
const (
	typeInvalidRequest = "invalid_request_error"
	typeServer         = "server_error"
)

// clientError is a refusal of the request as the client sent it.
func clientError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Type: typeInvalidRequest, Code: code, Message: msg}
}

// serverError is a failure on the gateway's or the upstream's side.
func serverError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Type: typeServer, Code: code, Message: msg}
}

// withParam is e naming the request parameter at fault.
func (e *apiError) withParam(param string) *apiError {
	c := *e
	c.Param = param
	return &c
}

// Corral's own answers, one a line: status, code, what the client reads.
var (
	errInvalidAPIKey = clientError(http.StatusUnauthorized, "invalid_api_key", "Incorrect or missing API key. Send your Corral key as 'Authorization: Bearer YOUR_KEY'.")
	// errInvalidAnthropicKey is the 401 on Anthropic's routes, whose SDKs
	// and agents send x-api-key; both headers work there.
	errInvalidAnthropicKey = clientError(http.StatusUnauthorized, "invalid_api_key", "Incorrect or missing API key. Send your Corral key as 'x-api-key: YOUR_KEY' or 'Authorization: Bearer YOUR_KEY'.")
	errTooLarge            = clientError(http.StatusRequestEntityTooLarge, "request_too_large", "Request body is larger than this gateway accepts.")
	errMethodNotAllowed    = clientError(http.StatusMethodNotAllowed, "method_not_allowed", "Method not allowed for this path.")
	// errClientClosed is logged, never seen: the client is gone.
	errClientClosed = clientError(499, "client_closed_request", "The client closed the request.")
	// errNoUpstreamForModel answers a model no configured upstream serves.
	errNoUpstreamForModel = clientError(http.StatusNotFound, "model_not_found", "The model is not served by any upstream of this gateway.").withParam("model")
	// errNotServed: the upstreams of the API (clouds' runtime APIs) do not
	// serve this endpoint, stored objects included; nothing was sent.
	errNotServed = clientError(http.StatusNotFound, "not_found", "No upstream of this gateway serves this endpoint.")

	errInternal         = serverError(http.StatusInternalServerError, "internal_error", "Corral hit an internal error; the request id identifies it in the gateway's logs.")
	errUpstreamAuth     = serverError(http.StatusBadGateway, "upstream_auth_error", "The upstream provider rejected the gateway's credentials. This is a gateway configuration problem, not your API key.")
	errUpstreamTimeout  = serverError(http.StatusGatewayTimeout, "upstream_timeout", "The upstream provider did not answer in time.")
	errUpstream         = serverError(http.StatusBadGateway, "upstream_error", "The upstream provider could not be reached or broke the connection.")
	errStreamBroken     = serverError(http.StatusBadGateway, "upstream_error", "The upstream stream ended before it was complete.")
	errUpstreamTooLarge = serverError(http.StatusBadGateway, "upstream_error", "The upstream answer was larger than the gateway accepts.")
	// errUpstreamRateLimited stands in for an upstream's own 429 body,
	// which describes the shared upstream account (ownRateLimit).
	errUpstreamRateLimited = &apiError{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded",
		Message: "The upstream provider is rate limiting this gateway; retry after the time Retry-After gives."}
	errShuttingDown = serverError(http.StatusServiceUnavailable, "gateway_shutting_down", "This gateway instance is shutting down; retry the request.")
	// errNoUpstreamAvailable answers when every upstream for the model is
	// cooling down or has its circuit open.
	errNoUpstreamAvailable = serverError(http.StatusServiceUnavailable, "upstream_unavailable", "Every upstream for this model is failing or cooling down; retry shortly.")
	// errWaitTimeout answers a waiter whose leader on another instance did
	// not finish within CORRAL_WAIT_TIMEOUT, when the gateway is set to fail
	// rather than call upstream itself.
	errWaitTimeout = serverError(http.StatusGatewayTimeout, "upstream_timeout", "Timed out waiting for an identical request in progress on another gateway instance.")
)

func errInvalidRequest(msg, param string) *apiError {
	return clientError(http.StatusBadRequest, "invalid_request_error", msg).withParam(param)
}

func errModelNotAllowed(model string) *apiError {
	return clientError(http.StatusForbidden, "model_not_allowed", "The model "+strconv.Quote(model)+" is not allowed for this API key.").withParam("model")
}

// statusError is the one place where an error becomes what the client
// sees: Corral's own refusals as they are, the flight layer's typed errors,
// and upstream call failures (502, 504 for timeouts, 499 when the client
// cancelled, 413 for a body over the limit).
func statusError(err error) *apiError {
	var (
		ae  *apiError
		ce  *coalesce.ConcurrencyError
		se  *coalesce.StreamError
		pe  *flight.PanicError
		mbe *http.MaxBytesError
	)
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, coalesce.ErrUpstreamAuth):
		return errUpstreamAuth
	case errors.Is(err, coalesce.ErrTooLarge):
		return errUpstreamTooLarge
	case errors.Is(err, coalesce.ErrWaitTimeout):
		return errWaitTimeout
	case errors.Is(err, coalesce.ErrShutdown):
		return errShuttingDown
	case errors.As(err, &ce):
		return errConcurrency(ce.Max)
	case errors.As(err, &se):
		if upstream.KindOf(se.Err) == upstream.Timeout {
			return errUpstreamTimeout
		}
		return errStreamBroken
	case errors.As(err, &pe):
		return errInternal
	case errors.As(err, &mbe):
		return errTooLarge
	case errors.Is(err, failover.ErrNoRoute):
		return errNoUpstreamForModel
	case errors.Is(err, failover.ErrNotServed):
		return errNotServed
	case errors.Is(err, failover.ErrNoneAvailable):
		return errNoUpstreamAvailable
	}
	switch upstream.KindOf(err) {
	case upstream.Timeout:
		return errUpstreamTimeout
	case upstream.Canceled:
		return errClientClosed
	}
	return errUpstream
}

// retryable reports whether a retry of the same request could get another
// answer: Corral's own 408, 409, 429 and 5xx. Every other error of its own
// (400, 401, 403, 404, 405, 413, 415, 422, ...) says so with
// x-should-retry: false, which the OpenAI and Anthropic SDKs (and Claude
// Code, which otherwise retries a 401 for minutes) obey.
func (e *apiError) retryable() bool {
	if e.noRetry {
		return false // a budget refusal: a 429 that no retry can change
	}
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooManyRequests:
		return true
	}
	return e.Status >= 500
}

// shouldRetryHeader is the header the SDKs read before their own status
// rules.
const shouldRetryHeader = "X-Should-Retry"

// setRetryHint marks h, the headers of e's answer, for the SDKs: false
// when no retry can help, and nothing otherwise (the SDKs' own rules retry
// 429 and 5xx with backoff).
func (e *apiError) setRetryHint(h http.Header) {
	if e.retryable() {
		h.Del(shouldRetryHeader)
		return
	}
	h.Set(shouldRetryHeader, "false")
}

// renderFailure is the answer a flight's error gives its client, in the
// request's wire format: what the waiters on other instances of a leader
// that failed transiently are answered with (coalesce.Options.Render).
//
// None is rendered for "no upstream available" (every candidate cooling
// down or with its circuit open): that is this instance's pool's state,
// reached without an upstream call, and another instance's pool may well
// take the call. Its waiters then lead themselves, and a refusal they get
// is their own, with no X-Corral-Cache (a shared one was served as
// COALESCED).
func renderFailure(req *coalesce.Request, err error) *entry.Entry {
	if errors.Is(err, failover.ErrNoneAvailable) {
		return nil
	}
	e := statusError(err)
	h := http.Header{"Content-Type": {"application/json"}}
	e.setRetryHint(h)
	return &entry.Entry{
		Status: e.Status,
		Header: h,
		Body:   req.Format.ErrorBody(e.wire()),
	}
}

// writeError sends e, and names its code in the request's access line.
// Nothing is written for a client that has gone away.
func writeError(w http.ResponseWriter, e *apiError) {
	sw := statusWriterOf(w)
	if sw != nil {
		sw.code = e.Code
	}
	if e.Status == errClientClosed.Status {
		if sw != nil {
			sw.status = e.Status
		}
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Del("Content-Length")
	format := errorFormatOf(w)
	if e.budget {
		h.Del("X-Corral-Cache") // a refusal is no answer
		if _, ok := format.(anthropic.Format); ok {
			c := *e
			c.Status, c.Type = http.StatusBadRequest, typeInvalidRequest
			e = &c
		}
	}
	e.setRetryHint(h)
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="corral"`)
	}
	switch {
	case e.Status != http.StatusTooManyRequests:
	case e.neverFits:
		// Retrying cannot help, and the SDKs retry whatever says when.
		h.Del("Retry-After")
		h.Del("retry-after-ms")
	case h.Get("Retry-After") == "":
		// Every other 429 says when to retry; the official SDKs honour it.
		d := e.retryAfter
		if d <= 0 {
			d = time.Second
		}
		ratelimit.SetRetryAfter(h, d)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(format.ErrorBody(e.wire()))
}

// errorFormatOf is the error shape of the route w answers: Anthropic's on
// /v1/messages..., OpenAI's everywhere else.
func errorFormatOf(w http.ResponseWriter) wire.Format {
	if anthropicRoute(w) {
		return anthropic.Format{}
	}
	return errorFormat
}

// anthropicRoute reports whether w answers a request on Anthropic's API.
func anthropicRoute(w http.ResponseWriter) bool {
	sw := statusWriterOf(w)
	return sw != nil && sw.anthropic
}

// statusWriterOf is the access log's writer under w, or nil.
func statusWriterOf(w http.ResponseWriter) *statusWriter {
	for w != nil {
		if sw, ok := w.(*statusWriter); ok {
			return sw
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			break
		}
		w = u.Unwrap()
	}
	return nil
}

// errBadBody maps a body parse error to what the client is told: which
// rule the body broke, never the body's bytes.
func errBadBody(err error) *apiError {
	switch {
	case errors.Is(err, keying.ErrNumberOutOfRange):
		return errInvalidRequest(fmt.Sprintf("A number in the request body has an exponent of more than %d digits.", keying.MaxExponentDigits), "")
	case errors.Is(err, keying.ErrAmbiguousKey):
		return errInvalidRequest("Top-level field names of the request body must not differ only in letter case from each other or from an API field (such as \"MODEL\" for \"model\").", "")
	}
	return errInvalidRequest("The request body is not a valid JSON object.", "")
}

// errConcurrency answers when the tenant's leader semaphore stayed full for
// the whole bounded wait.
func errConcurrency(max int) *apiError {
	return &apiError{Status: http.StatusTooManyRequests, Type: "requests", Code: "tenant_concurrency_exceeded",
		Message: "Too many concurrent upstream calls for this tenant (limit " + strconv.Itoa(max) + " per gateway instance); retry shortly."}
}

// Admin API refusals of the tenant store's changes.
var (
	errAdminTooLarge = clientError(http.StatusBadRequest, "request_too_large", "An admin request body is at most 64 KiB; nothing was changed.")
	// errNoTenantStore: a gateway wired without a tenant store.
	errNoTenantStore = errors.New("server: no tenant store")
)

func errManagedByFile(id string) *apiError {
	return clientError(http.StatusConflict, "tenant_managed_by_file",
		"Tenant "+jsonQuote(id)+" is declared in the tenants file; change it there and reload.").withParam("id")
}

// statusOfStore is what a tenant-store error tells the client: the
// store's refusals as 404 and 409, a policy that does not validate as 400
// naming its field, and a store that failed (Redis down, a file error) as
// 503, after which nothing was written.
func statusOfStore(err error, id string) *apiError {
	var pe *tenant.PolicyError
	switch {
	case errors.As(err, &pe):
		return errInvalidRequest("Invalid tenant policy: "+pe.Problem, pe.Field)
	case errors.Is(err, tenantstore.ErrExists):
		return clientError(http.StatusConflict, "tenant_exists", "A tenant with id "+jsonQuote(id)+" exists.").withParam("id")
	case errors.Is(err, tenantstore.ErrNotFound):
		return errUnknownTenant(id)
	case errors.Is(err, tenantstore.ErrKeyNotFound):
		return clientError(http.StatusNotFound, "not_found", "Tenant "+jsonQuote(id)+" has no key with this id.").withParam("key_id")
	case errors.Is(err, tenantstore.ErrContended):
		return serverError(http.StatusServiceUnavailable, "tenant_store_busy", "The tenant changed concurrently too often; retry the change.")
	case errors.Is(err, errNoTenantStore):
		return serverError(http.StatusServiceUnavailable, "tenant_store_unavailable", "This gateway has no tenant store.")
	}
	return serverError(http.StatusServiceUnavailable, "tenant_store_unavailable",
		"The tenant store (Redis, or the data dir in embedded mode) is unreachable; nothing was changed. Retry when it is back.")
}
