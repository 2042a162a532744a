// Package bedrock is Corral's envelope for Amazon Bedrock: Claude's
// Messages API through InvokeModel and InvokeModelWithResponseStream
// (api anthropic), and Bedrock's OpenAI-compatible chat completions (api
// openai). It signs every call with SigV4 for service "bedrock" from the
// AWS default credential chain, or sends a Bedrock API key as a bearer
// token.
package bedrock

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

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
}

// Client calls one Bedrock upstream; it is a failover.Doer and
// failover.Scoped.
type Client struct{ o Options }

// New returns a Client for o.
func New(o Options) (*Client, error) { return &Client{o: o}, nil }

// Do sends req, the client's request, to Bedrock.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	return nil, errors.New("bedrock: not built yet")
}

// Serves reports whether Bedrock answers method on path.
func (c *Client) Serves(method, path string) bool { return false }

// LoadCredentials loads the AWS default credential chain once for the
// process (environment, shared profile, web identity / IRSA, ECS and EC2
// roles).
func LoadCredentials(ctx context.Context) (aws.CredentialsProvider, error) {
	return nil, errors.New("bedrock: not built yet")
}
