// Package vertex is Corral's envelope for Google Vertex AI: Claude's
// Messages API through rawPredict and streamRawPredict (api anthropic),
// and Vertex's OpenAI-compatible endpoint (api openai), with OAuth2
// tokens from Google's application default credentials.
package vertex

import (
	"context"
	"errors"
	"net/http"
	"time"

	"golang.org/x/oauth2"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
)

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
type Client struct{ o Options }

// New returns a Client for o.
func New(o Options) (*Client, error) { return &Client{o: o}, nil }

// Do sends req, the client's request, to Vertex AI.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	return nil, errors.New("vertex: not built yet")
}

// Serves reports whether Vertex AI answers method on path.
func (c *Client) Serves(method, path string) bool { return false }

// DefaultTokenSource is the process's Google application default
// credentials (service-account or external-account JSON, workload
// identity, the metadata server) for the cloud-platform scope, refreshed
// before each token expires.
func DefaultTokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	return nil, errors.New("vertex: not built yet")
}
