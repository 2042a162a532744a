// Package upstream is Corral's client for the OpenAI-compatible model
// provider: it forwards request bytes untouched with Corral's own key,
// bounds every call with a timeout, and reads Server-Sent Events one event
// at a time so the gateway can relay them without buffering.
package upstream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.opentelemetry.io/otel/propagation"

	"github.com/corralhq/corral/internal/redact"
	"github.com/corralhq/corral/internal/telemetry"
)

// Options configure a Client. Zero values take the documented defaults.
type Options struct {
	// BaseURL is the upstream base including its version path, e.g.
	// https://api.openai.com/v1. Required.
	BaseURL string
	// APIKey is Corral's key for this upstream, sent as Auth says; empty
	// sends none (local models often need none).
	APIKey string
	// Auth is how APIKey is sent: "bearer" (Authorization: Bearer, the
	// default), "api-key" (Azure's api-key header) or "x-api-key"
	// (Anthropic's).
	Auth string
	// Headers are extra headers sent on every request (OpenAI-Project,
	// api-version, ...). They replace a client's header of the same name.
	Headers map[string]string
	// Timeout bounds one call from dial to the last byte of the body,
	// streams included. Default 120s.
	Timeout time.Duration
	// Transport overrides the tuned default transport (tests).
	Transport http.RoundTripper
	// ForwardBaggage sends a client's W3C baggage header on
	// (CORRAL_FORWARD_BAGGAGE). Default false: baggage is whatever the
	// client wrote, often user or account data, and the upstreams are
	// shared third parties.
	ForwardBaggage bool
	// Authorizer, when set, adds credentials to every request after its
	// headers are final (a cloud's SigV4 signature or OAuth token); the
	// static APIKey is then usually empty.
	Authorizer Authorizer
}

// Authorizer adds a cloud's credentials to an outgoing request: a SigV4
// signature (which covers the URL, the headers set so far and the body's
// hash) or a short-lived bearer token its library refreshes before it
// expires. body is the request's body (nil for a streamed one). An error
// means the credentials could not be had: the call fails as a connection
// failure of that upstream, which fails over. Its text must name no
// secret.
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request, body []byte) error
}

// Client calls the upstream. It is safe for concurrent use.
type Client struct {
	base     *url.URL
	authName string // the header carrying the key: Authorization, Api-Key or X-Api-Key
	auth     string // its value ("Bearer <key>" or the key); "" sends none
	extra    http.Header
	timeout  time.Duration
	hc       *http.Client
	baggage  bool                          // forward the client's baggage
	prop     propagation.TextMapPropagator // what an attempt's span context is sent as
	authz    Authorizer                    // a cloud's credentials; nil sends auth only
}

// New returns a client for opts.
func New(opts Options) (*Client, error) {
	u, err := url.Parse(opts.BaseURL)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("upstream: base URL %q must be an http(s) URL", redact.URL(opts.BaseURL))
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, timeout: opts.Timeout, baggage: opts.ForwardBaggage, prop: propagation.TraceContext{}, authz: opts.Authorizer}
	if c.baggage {
		c.prop = telemetry.Propagator
	}
	if c.timeout <= 0 {
		c.timeout = 120 * time.Second
	}
	switch opts.Auth {
	case "", "bearer":
		c.authName = "Authorization"
		if opts.APIKey != "" {
			c.auth = "Bearer " + opts.APIKey
		}
	case "api-key", "x-api-key":
		c.authName, c.auth = http.CanonicalHeaderKey(opts.Auth), opts.APIKey
	default:
		return nil, fmt.Errorf("upstream: auth %q must be bearer, api-key or x-api-key", opts.Auth)
	}
	if len(opts.Headers) > 0 {
		c.extra = make(http.Header, len(opts.Headers))
		for k, v := range opts.Headers {
			c.extra.Set(k, v)
		}
	}
	rt := opts.Transport
	if rt == nil {
		rt = NewTransport(TransportOptions{ResponseHeaderTimeout: c.timeout})
	}
	c.hc = &http.Client{
		Transport: rt,
		// A redirect from a model API is unexpected; hand it to the client
		// rather than following it with Corral's key attached.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Request is one call to forward.
type Request struct {
	Method string
	// Path is the client's path below /v1, e.g. "/chat/completions".
	Path string
	// RawPath, when set, is Path as sent, escaped (a cloud's model id in
	// the path may hold '/' or ':'); see url.URL.RawPath.
	RawPath  string
	RawQuery string
	// Model is the model the router chose the upstream for ("" when the
	// call was routed by name or names no model). It is never sent: a
	// cloud's envelope reads it to find the provider's model id.
	Model string
	// Header is the client's request header; Do forwards only what is safe
	// (see forwardHeader).
	Header http.Header
	// Body is sent byte for byte.
	Body []byte
	// Stream, when set instead of Body, is sent as it is read (a large
	// upload is never held whole in memory); ContentLength is its length,
	// -1 when unknown (then it is sent chunked). A streamed request is
	// never retried: its bytes cannot be read twice.
	Stream        io.Reader
	ContentLength int64
	// Tenant is whose call this is. It is never sent: the failover router
	// reads it, so that one tenant's slow requests timing out do not
	// count against an upstream every tenant shares.
	Tenant string
}

// Do sends req and returns the upstream response with its body open; the
// caller must close it. The call is bounded by the client's Timeout from
// now; cancelling ctx cancels it. Errors are *Error with a Kind.
func (c *Client) Do(ctx context.Context, req Request) (*http.Response, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.timeout, errTimeout)
	resp, err := c.send(ctx, req)
	var de *DialError
	if errors.As(err, &de) && ctx.Err() == nil && req.Stream == nil {
		// Nothing reached the upstream, so a second try cannot double-bill
		// a non-idempotent POST; any later failure is never retried.
		resp, err = c.send(ctx, req)
	}
	if err != nil {
		err = classify(ctx, err) // before cancel, which would make it look like the caller's doing
		cancel()
		return nil, err
	}
	resp.Body = &cancelBody{ReadCloser: resp.Body, ctx: ctx, cancel: cancel}
	return resp, nil
}

func (c *Client) send(ctx context.Context, req Request) (*http.Response, error) {
	u := *c.base
	u.Path = c.base.Path + req.Path
	if req.RawPath != "" {
		u.RawPath = c.base.EscapedPath() + req.RawPath
	}
	// A base URL's own query (Azure's ?api-version=) is kept, the
	// request's appended to it.
	switch {
	case c.base.RawQuery == "":
		u.RawQuery = req.RawQuery
	case req.RawQuery != "":
		u.RawQuery = c.base.RawQuery + "&" + req.RawQuery
	}
	// A *bytes.Reader body lets net/http see the body is in memory, set
	// ContentLength and GetBody, and write headers and body in one
	// syscall (a wrapped reader costs a second write per call).
	var body io.Reader
	switch {
	case req.Stream != nil:
		body = io.NopCloser(req.Stream) // the server closes the client's body, not the transport
	case req.Body != nil:
		body = bytes.NewReader(req.Body)
	}
	hreq, err := http.NewRequestWithContext(ctx, req.Method, u.String(), body)
	if err != nil {
		return nil, fmt.Errorf("upstream: build request: %w", err)
	}
	if req.Stream != nil {
		hreq.ContentLength = req.ContentLength
	}
	forwardHeader(hreq.Header, req.Header, c.baggage)
	for k, vv := range c.extra {
		hreq.Header[k] = vv
	}
	if c.auth != "" {
		hreq.Header.Set(c.authName, c.auth)
	}
	// The call's own span (failover's attempt), when traced, replaces the
	// client's traceparent: the upstream's spans become the attempt's
	// children. Untraced, the client's traceparent passes as it came.
	// Baggage the server read from the client goes on only as
	// ForwardBaggage says.
	c.prop.Inject(ctx, propagation.HeaderCarrier(hreq.Header))
	if c.authz != nil {
		// Last: a signature covers every header set above.
		if err := c.authz.Authorize(ctx, hreq, req.Body); err != nil {
			if ctx.Err() != nil {
				return nil, err // classify names the timeout or the caller's leaving
			}
			return nil, &Error{Kind: Connect, Err: fmt.Errorf("credentials: %w", err)}
		}
	}
	return c.hc.Do(hreq)
}

// CloseIdleConnections closes pooled connections not in use, for a clean
// shutdown.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }
