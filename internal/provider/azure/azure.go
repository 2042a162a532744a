// Package azure is Corral's envelope for Azure OpenAI: the v1 API
// ({url}/<path>, the model replaced by its deployment alias) and the
// classic API ({url}/deployments/{id}/<path>?api-version=...), with an
// api-key or a Microsoft Entra ID token.
package azure

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/upstream"
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
	// Auth is "api-key" (APIKey) or "entra" (Credential).
	Auth       string
	APIKey     string
	Credential azcore.TokenCredential
	// Headers, Timeout, ForwardBaggage and Transport are upstream.Options'.
	Headers        map[string]string
	Timeout        time.Duration
	ForwardBaggage bool
	Transport      http.RoundTripper
}

// Client calls one Azure OpenAI upstream; it is a failover.Doer.
type Client struct{ o Options }

// New returns a Client for o.
func New(o Options) (*Client, error) { return &Client{o: o}, nil }

// Do sends req, the client's request, to Azure OpenAI.
func (c *Client) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	return nil, errors.New("azure: not built yet")
}

// DefaultCredential is azidentity's default chain (client secret or
// certificate, workload identity, managed identity) for the process.
func DefaultCredential() (azcore.TokenCredential, error) {
	return nil, errors.New("azure: not built yet")
}

// Check asks c for a token once (the start-up check).
func Check(ctx context.Context, c azcore.TokenCredential) error {
	return errors.New("azure: not built yet")
}
