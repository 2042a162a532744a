// Package bedrock is Corral's envelope for Amazon Bedrock: Claude's
// Messages API through InvokeModel and InvokeModelWithResponseStream
// (api anthropic), and Bedrock's OpenAI-compatible chat completions (api
// openai). It signs every call with SigV4 for service "bedrock" from the
// AWS default credential chain, or sends a Bedrock API key as a bearer
// token.
//
// The envelope is anthropic-sdk-go/v2's bedrock middleware, edit for edit
// (the SDK is the reference where it and the design differ): the model
// moves from the body into the path, "stream" leaves the body (the path
// says invoke or invoke-with-response-stream), anthropic-version and
// anthropic-beta move from headers into the body. Every other byte of the
// body is the client's. Bedrock's binary event stream is decoded frame by
// frame into Anthropic's SSE as it arrives (stream.go), and Bedrock's
// errors are told to the client in its API's own shape (errors.go).
package bedrock

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

// Options configure a Client.
type Options struct {
	// API is "anthropic" (Claude's Messages API) or "openai" (Bedrock's
	// OpenAI-compatible chat completions).
	API string
	// BaseURL is Bedrock's runtime endpoint,
	// https://bedrock-runtime.<region>.amazonaws.com by default.
	BaseURL string
	// Region signs the calls.
	Region string
	// Aliases map client models to Bedrock model or inference profile ids.
	Aliases []provider.Alias
	// Auth is "sigv4" (Credentials) or "bearer" (APIKey, a Bedrock API key).
	Auth   string
	APIKey string
	// Credentials are the process's AWS credentials (LoadCredentials),
	// cached and refreshed before they expire by the AWS SDK.
	Credentials aws.CredentialsProvider
	// Headers, Timeout, ForwardBaggage and Transport are upstream.Options'.
	Headers        map[string]string
	Timeout        time.Duration
	ForwardBaggage bool
	Transport      http.RoundTripper
	// Now is the signing clock. Default time.Now.
	Now func() time.Time
}

// Client calls one Bedrock upstream; it is a failover.Doer and
// failover.Scoped. It is safe for concurrent use.
type Client struct {
	o  Options
	up *upstream.Client
}

// New returns a Client for o.
func New(o Options) (*Client, error) {
	if o.API != provider.Anthropic && o.API != provider.OpenAI {
		return nil, fmt.Errorf("bedrock: api %q must be anthropic or openai", o.API)
	}
	uo := upstream.Options{BaseURL: o.BaseURL, Headers: o.Headers, Timeout: o.Timeout,
		ForwardBaggage: o.ForwardBaggage, Transport: o.Transport}
	switch o.Auth {
	case "", "sigv4":
		if o.Credentials == nil {
			return nil, errors.New("bedrock: auth sigv4 needs AWS credentials")
		}
		if o.Region == "" {
			return nil, errors.New("bedrock: auth sigv4 needs a region")
		}
		uo.Authorizer = newSigner(o.Credentials, o.Region, o.Now)
	case "bearer":
		if o.APIKey == "" {
			return nil, errors.New("bedrock: auth bearer needs a Bedrock API key")
		}
		uo.Auth, uo.APIKey = "bearer", o.APIKey
	default:
		return nil, fmt.Errorf("bedrock: auth %q must be sigv4 or bearer", o.Auth)
	}
	up, err := upstream.New(uo)
	if err != nil {
		return nil, fmt.Errorf("bedrock: %w", err)
	}
	return &Client{o: o, up: up}, nil
}

// Do sends req, the client's request, to Bedrock and returns the answer
// in the client's API: a Messages answer or Anthropic SSE for api
// anthropic, chat completions for api openai, and errors in that API's
// shape with Bedrock's status. A stream's first event frame has been read
// when Do returns, so an exception Bedrock sends before any event is a
// status the router can fail over on, not a broken stream.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	if req.Stream != nil {
		return nil, &upstream.Error{Kind: upstream.Connect, Err: errors.New("bedrock: a streamed request body cannot be re-enveloped")}
	}
	id := provider.ModelID(c.o.Aliases, provider.RequestModel(req.Model, req.Body))
	out, stream, err := c.envelope(req, id)
	if err != nil {
		return badRequest(c.o.API, err.Error()), nil
	}
	resp, err := c.up.Do(ctx, out)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 400 {
		provider.Reshape(resp, c.o.API, parseError)
		return resp, nil
	}
	if stream && isEventStream(resp.Header) {
		return firstFrame(ctx, resp)
	}
	return resp, nil
}

// Serves reports whether Bedrock answers method on path: Messages on
// InvokeModel for api anthropic (count_tokens is not offered: Bedrock's
// CountTokens takes another body), chat completions for api openai.
// Nothing else exists on Bedrock's runtime (no stored objects, no models
// list), so the router never sends it there.
func (c *Client) Serves(method, path string) bool {
	if method != http.MethodPost {
		return false
	}
	if c.o.API == provider.Anthropic {
		return path == "/messages"
	}
	return path == "/chat/completions"
}

// CloseIdleConnections closes pooled connections not in use.
func (c *Client) CloseIdleConnections() { c.up.CloseIdleConnections() }

// LoadCredentials loads the AWS default credential chain once for the
// process (environment, shared profile, web identity / IRSA, ECS and EC2
// roles). The provider it returns caches credentials and refreshes them
// before they expire; it may fail later, at Retrieve, when no source
// has credentials yet.
func LoadCredentials(ctx context.Context) (aws.CredentialsProvider, error) {
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("bedrock: load AWS config: %w", err)
	}
	if cfg.Credentials == nil {
		return nil, errors.New("bedrock: the AWS default chain has no credential source")
	}
	return cfg.Credentials, nil
}
