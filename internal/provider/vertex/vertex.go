// Package vertex is Corral's envelope for Google Vertex AI: Claude's
// Messages API through rawPredict and streamRawPredict (api anthropic),
// and Vertex's OpenAI-compatible endpoint (api openai), with OAuth2
// tokens from Google's application default credentials.
//
// The envelope is what anthropic-sdk-go's vertex package does to a
// Messages request, and no more: the model leaves the body for the URL
// (POST /messages → .../publishers/anthropic/models/{id}:rawPredict, or
// :streamRawPredict when the body's stream is true), the anthropic-version
// header becomes the body's anthropic_version unless the body has one,
// and count_tokens goes to .../models/count-tokens:rawPredict with the
// model kept in the body (as its alias). The anthropic-beta header is
// sent as the client sent it: the SDK leaves it alone on Vertex, which
// reads it there. On the OpenAI-compatible endpoint only the model
// string is replaced by its alias. Every other byte of a body is the
// client's. Streams are Server-Sent Events already and pass as they come.
package vertex

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/tidwall/gjson"
	"golang.org/x/oauth2"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

// DefaultAnthropicVersion is the body's anthropic_version when neither the
// body nor the client's anthropic-version header gives one: the version
// Vertex AI documents for Claude.
const DefaultAnthropicVersion = "vertex-2023-10-16"

// Options configure a Client.
type Options struct {
	// API is "anthropic" or "openai".
	API string
	// BaseURL is Vertex AI's endpoint for Region (config.VertexURL).
	BaseURL string
	// Project and Region name the Vertex AI location.
	Project, Region string
	// Aliases map client models to Vertex model versions.
	Aliases []provider.Alias
	// Tokens is the process's token source (DefaultTokenSource).
	Tokens oauth2.TokenSource
	// Headers, Timeout, ForwardBaggage and Transport are upstream.Options'.
	Headers        map[string]string
	Timeout        time.Duration
	ForwardBaggage bool
	Transport      http.RoundTripper
}

// Client calls one Vertex AI upstream; it is a failover.Doer and
// failover.Scoped.
type Client struct {
	o  Options
	up *upstream.Client
	// location is /v1/projects/{project}/locations/{region}, as Path and
	// escaped (RawPath).
	location, rawLocation string
}

// New returns a Client for o.
func New(o Options) (*Client, error) {
	switch {
	case o.API != provider.Anthropic && o.API != provider.OpenAI:
		return nil, errors.New("vertex: api must be anthropic or openai")
	case o.Project == "" || o.Region == "":
		return nil, errors.New("vertex: project and region are required")
	case o.Tokens == nil:
		return nil, errors.New("vertex: no token source")
	}
	up, err := upstream.New(upstream.Options{
		BaseURL: o.BaseURL, Headers: o.Headers, Timeout: o.Timeout, ForwardBaggage: o.ForwardBaggage,
		Transport: o.Transport, Authorizer: bearer{o.Tokens},
	})
	if err != nil {
		return nil, err
	}
	return &Client{
		o: o, up: up,
		location:    "/v1/projects/" + o.Project + "/locations/" + o.Region,
		rawLocation: "/v1/projects/" + url.PathEscape(o.Project) + "/locations/" + url.PathEscape(o.Region),
	}, nil
}

// Serves reports whether Vertex AI answers method on path: Claude's
// messages and count_tokens, or the OpenAI-compatible chat completions.
// Vertex keeps no stored objects and lists no models for Corral to relay.
func (c *Client) Serves(method, path string) bool {
	if method != http.MethodPost {
		return false
	}
	if c.o.API == provider.Anthropic {
		return path == "/messages" || path == "/messages/count_tokens"
	}
	return path == "/chat/completions"
}

// Do sends req, the client's request, to Vertex AI. The answer is in the
// client's API: Google's error bodies are reshaped into it (status and
// retry headers kept), Claude's own error bodies and every success pass as
// Vertex sent them.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	if !c.Serves(req.Method, req.Path) {
		return c.refuse(http.StatusNotFound, "Vertex AI does not serve "+req.Method+" /v1"+req.Path), nil
	}
	out, msg := c.envelope(req)
	if msg != "" {
		return c.refuse(http.StatusBadRequest, msg), nil
	}
	resp, err := c.up.Do(ctx, out)
	if err != nil {
		return nil, err
	}
	provider.Reshape(resp, c.o.API, parseError)
	return resp, nil
}

// envelope is req as Vertex AI takes it, or the reason it cannot be sent
// (the client's mistake: a 400 in its API's shape).
func (c *Client) envelope(req upstream.Request) (upstream.Request, string) {
	body := req.Body
	if req.Stream != nil || !gjson.ValidBytes(body) || !gjson.ParseBytes(body).IsObject() {
		// Every endpoint Vertex serves takes one JSON object, edited whole.
		return req, "the request body must be a JSON object"
	}
	model := provider.RequestModel(req.Model, body)
	if model == "" {
		return req, "model: field required"
	}
	id := provider.ModelID(c.o.Aliases, model)
	h := cloudHeader(req.Header)
	var err error
	switch req.Path {
	case "/chat/completions":
		if provider.Field(body, "model").String() != id {
			body, err = provider.SetString(body, "model", id)
		}
		req.Path = c.location + "/endpoints/openapi/chat/completions"
		req.RawPath = c.rawLocation + "/endpoints/openapi/chat/completions"
	case "/messages", "/messages/count_tokens":
		// Vertex takes the API version from the body (as the SDK moves it).
		version := h.Get("Anthropic-Version")
		h.Del("Anthropic-Version")
		if version == "" {
			version = DefaultAnthropicVersion
		}
		if !provider.Field(body, "anthropic_version").Exists() {
			body, err = provider.SetString(body, "anthropic_version", version)
		}
		if err == nil && req.Path == "/messages/count_tokens" {
			// The one Claude call whose model stays in the body.
			if provider.Field(body, "model").String() != id {
				body, err = provider.SetString(body, "model", id)
			}
			req.Path = c.location + "/publishers/anthropic/models/count-tokens:rawPredict"
			req.RawPath = c.rawLocation + "/publishers/anthropic/models/count-tokens:rawPredict"
			break
		}
		if err == nil {
			body, err = provider.Delete(body, "model")
		}
		if !provider.PathSegment(id) || strings.Contains(id, ":") {
			// A ':' would start another method (":streamRawPredict:...").
			return req, "model: not a Vertex AI model id"
		}
		specifier := ":rawPredict"
		if provider.Field(body, "stream").Bool() {
			specifier = ":streamRawPredict"
		}
		req.Path = c.location + "/publishers/anthropic/models/" + id + specifier
		// The id is one segment: a '/' or ';' in it is escaped, as the SDK
		// escapes it, so it can name no other resource.
		req.RawPath = c.rawLocation + "/publishers/anthropic/models/" + url.PathEscape(id) + specifier
	}
	if err != nil {
		return req, "the request body is not a JSON object"
	}
	// Only the query the SDK sends passes (Beta.Messages' ?beta=true).
	req.RawQuery = provider.SDKQuery(req.RawQuery)
	req.Body, req.Header = body, h
	return req, ""
}

// cloudHeader is the client's header without what Google would read as a
// credential or a request parameter of its own (X-Goog-*: an API key, a
// quota project, routing parameters) or another cloud's signed fields.
func cloudHeader(src http.Header) http.Header {
	h := src.Clone()
	if h == nil {
		h = http.Header{}
	}
	for k := range h {
		if strings.HasPrefix(k, "X-Goog-") || strings.HasPrefix(k, "X-Amz-") || strings.HasPrefix(k, "X-Ms-") {
			delete(h, k)
		}
	}
	return h
}

// refuse is an answer Corral gives in Vertex's place, in the client's API.
func (c *Client) refuse(status int, msg string) *http.Response {
	resp := &http.Response{
		StatusCode: status, Status: strconv.Itoa(status) + " " + http.StatusText(status),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": {"application/json"}},
	}
	provider.Replace(resp, provider.ErrorBody(c.o.API, provider.CloudError{Status: status, Message: msg}))
	return resp
}
