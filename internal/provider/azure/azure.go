// Package azure is Corral's envelope for Azure OpenAI: the v1 API
// ({url}/<path>, the model replaced by its deployment alias) and the
// classic API ({url}/deployments/{id}/<path>?api-version=...), with an
// api-key or a Microsoft Entra ID token.
//
// The envelope follows openai-go's azure option (the reference): on the
// classic API the deployment-scoped endpoints (chat/completions,
// completions, embeddings, audio/*, images/*) carry the deployment in the
// path and keep the body's model; every other path goes to {url}/<path>
// with the same api-version. On the v1 API the body's model is the
// deployment: Corral replaces the model string with its alias and leaves
// every other byte as the client sent it.
//
// A Client is not failover.Scoped: Azure OpenAI keeps stored objects
// (files, batches, stored responses and chat completions, vector stores,
// fine-tuning jobs) like OpenAI itself, on both API styles, so it serves
// every OpenAI path; an endpoint a resource lacks is Azure's own 404 in
// OpenAI's shape.
package azure

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

// Auth styles.
const (
	// AuthAPIKey sends the resource's key in the api-key header.
	AuthAPIKey = "api-key"
	// AuthEntra sends a Microsoft Entra ID token as a bearer token.
	AuthEntra = "entra"
)

// Options configure a Client.
type Options struct {
	// BaseURL is the resource's URL: .../openai/v1 (v1) or .../openai
	// (classic, with APIVersion).
	BaseURL string
	// APIVersion set selects the classic API.
	APIVersion string
	// Aliases map client models to deployments.
	Aliases []provider.Alias
	// Auth is "api-key" (APIKey, the default) or "entra" (Credential).
	Auth       string
	APIKey     string
	Credential azcore.TokenCredential
	// Headers, Timeout, ForwardBaggage and Transport are upstream.Options'.
	Headers        map[string]string
	Timeout        time.Duration
	ForwardBaggage bool
	Transport      http.RoundTripper
}

// Client calls one Azure OpenAI upstream; it is a failover.Doer. It is
// safe for concurrent use.
type Client struct {
	up         *upstream.Client
	aliases    []provider.Alias
	apiVersion string // "" = the v1 API
}

// New returns a Client for o.
func New(o Options) (*Client, error) {
	uo := upstream.Options{BaseURL: o.BaseURL, Headers: o.Headers, Timeout: o.Timeout,
		ForwardBaggage: o.ForwardBaggage, Transport: o.Transport}
	switch o.Auth {
	case "", AuthAPIKey:
		if o.APIKey == "" {
			return nil, fmt.Errorf("azure: auth api-key needs a key")
		}
		uo.Auth, uo.APIKey = AuthAPIKey, o.APIKey
	case AuthEntra:
		if o.Credential == nil {
			return nil, fmt.Errorf("azure: auth entra needs a credential")
		}
		uo.Authorizer = newTokens(o.Credential, time.Now)
	default:
		return nil, fmt.Errorf("azure: auth %q must be api-key or entra", o.Auth)
	}
	up, err := upstream.New(uo)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	return &Client{up: up, aliases: o.Aliases, apiVersion: o.APIVersion}, nil
}

// deploymentPaths are the endpoints the classic API serves under
// /deployments/{id}: openai-go's azure option's JSON and multipart routes.
var deploymentPaths = map[string]bool{
	"/completions":          true,
	"/chat/completions":     true,
	"/embeddings":           true,
	"/audio/speech":         true,
	"/images/generations":   true,
	"/audio/transcriptions": true,
	"/audio/translations":   true,
	"/images/edits":         true,
}

// Do sends req, the client's request, to Azure OpenAI and returns the
// answer in OpenAI's shape: a success as Azure sent it (its own model
// field kept), an error reshaped (see reshape) with its status and retry
// headers.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	req.Header = outboundHeader(req.Header)
	if c.apiVersion != "" {
		if deploymentPaths[req.Path] {
			model := c.requestModel(req)
			if model == "" {
				return badRequest("you must provide a model parameter"), nil
			}
			dep := provider.ModelID(c.aliases, model)
			if !provider.PathSegment(dep) {
				// "." or ".." would climb out of /deployments/.
				return badRequest("the model is not a deployment name"), nil
			}
			escaped := req.RawPath
			if escaped == "" {
				escaped = (&url.URL{Path: req.Path}).EscapedPath()
			}
			req.Path = "/deployments/" + dep + req.Path
			req.RawPath = "/deployments/" + url.PathEscape(dep) + escaped
		}
		req.RawQuery = withAPIVersion(c.apiVersion, req.RawQuery)
	} else if req.Body != nil {
		body, err := c.aliasModel(req)
		if err != nil {
			return nil, err
		}
		req.Body = body
	}
	resp, err := c.up.Do(ctx, req)
	if err != nil {
		return nil, err
	}
	dropAccountHeaders(resp.Header)
	if resp.StatusCode >= 400 {
		reshape(resp)
	}
	return resp, nil
}

// requestModel is the client's model for a deployment-scoped call: the
// routed one, else the JSON body's or the multipart form's "model".
func (c *Client) requestModel(req upstream.Request) string {
	if req.Model != "" {
		return req.Model
	}
	if m := provider.Field(req.Body, "model"); m.Exists() {
		return m.String()
	}
	return multipartModel(req.Header.Get("Content-Type"), req.Body)
}

// aliasModel is the v1 body with its model replaced by the deployment its
// alias names: a JSON body's top-level "model" string (surgically: every
// other byte stays), or a multipart form's model field. A body whose
// model has no alias is sent as it came.
func (c *Client) aliasModel(req upstream.Request) ([]byte, error) {
	if m := provider.Field(req.Body, "model"); m.Exists() {
		if m.Type != gjson.String {
			return req.Body, nil
		}
		dep := provider.ModelID(c.aliases, m.String())
		if dep == m.String() {
			return req.Body, nil
		}
		b, err := provider.SetString(req.Body, "model", dep)
		if err != nil {
			return nil, fmt.Errorf("azure: set model: %w", err)
		}
		return b, nil
	}
	ct := req.Header.Get("Content-Type")
	if m := multipartModel(ct, req.Body); m != "" {
		if dep := provider.ModelID(c.aliases, m); dep != m {
			if b, ok := replaceMultipartModel(ct, req.Body, dep); ok {
				return b, nil
			}
		}
	}
	return req.Body, nil
}

// withAPIVersion is the classic API's query: api-version first, then the
// client's own query without an api-version of its own (the upstream's
// configuration picks the version; two would be ambiguous to Azure).
func withAPIVersion(version, clientQuery string) string {
	q := "api-version=" + url.QueryEscape(version)
	for p := range strings.SplitSeq(clientQuery, "&") {
		if p == "" {
			continue
		}
		k, _, _ := strings.Cut(p, "=")
		if key, err := url.QueryUnescape(k); err == nil && strings.EqualFold(key, "api-version") {
			continue
		}
		q += "&" + p
	}
	return q
}

// credentialHeaders are client headers Azure (or the API Management in
// front of it) reads as credentials or its own controls; Corral sends its
// own credentials and no client may speak for Corral's resource. The
// Authorization and api-key headers never leave the upstream client.
var credentialHeaders = []string{"Ocp-Apim-Subscription-Key", "Ocp-Apim-Trace", "Api-Version"}

// outboundHeader is h without the headers Azure would read as Corral's
// credentials or its own (x-ms-*, API Management's); h itself is not
// changed.
func outboundHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, vv := range h {
		if strings.HasPrefix(http.CanonicalHeaderKey(k), "X-Ms-") {
			continue
		}
		out[k] = vv
	}
	for _, k := range credentialHeaders {
		out.Del(k)
	}
	return out
}

// accountHeaders describe Corral's Azure resource rather than the answer:
// its deployment names, region and request ids. The client correlates by
// Corral's X-Request-Id.
var accountHeaders = []string{"Apim-Request-Id", "X-Ms-Region", "X-Ms-Deployment-Name", "Azureml-Model-Session",
	"X-Ms-Client-Request-Id", "Azureml-Model-Group", "X-Ms-Rai-Invoked"}

func dropAccountHeaders(h http.Header) {
	for _, k := range accountHeaders {
		h.Del(k)
	}
}
