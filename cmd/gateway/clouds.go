package main

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/aws/aws-sdk-go-v2/aws"
	"golang.org/x/oauth2"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/provider/azure"
	"github.com/corralhq/corral/internal/provider/bedrock"
	"github.com/corralhq/corral/internal/provider/vertex"
	"github.com/corralhq/corral/internal/upstream"
)

// clouds holds the process's cloud credentials: AWS's default chain, Google's
// application default credentials and Entra ID's default chain, each made
// on first use by an upstream that needs it and kept across reloads (their
// libraries cache and refresh the short-lived parts themselves).
type clouds struct {
	mu     sync.Mutex
	aws    aws.CredentialsProvider
	google oauth2.TokenSource
	entra  azcore.TokenCredential
}

// doer builds the client for u: a cloud's envelope for azure, bedrock and
// vertex, the plain upstream client otherwise.
func (cl *clouds) doer(cfg config.Config, u config.Upstream, timeout time.Duration) (failover.Doer, error) {
	aliases := make([]provider.Alias, len(u.Aliases))
	for i, a := range u.Aliases {
		aliases[i] = provider.Alias{Glob: a.Glob, ID: a.ID}
	}
	switch u.Provider {
	case config.ProviderAzure:
		o := azure.Options{BaseURL: u.URL, APIVersion: u.APIVersion, Aliases: aliases, Auth: u.Auth, APIKey: u.APIKey,
			Headers: u.Headers, Timeout: timeout, ForwardBaggage: cfg.ForwardBaggage}
		if u.Auth == config.AuthEntra {
			c, err := cl.entraCredential()
			if err != nil {
				return nil, err
			}
			o.Credential = c
		}
		return azure.New(o)
	case config.ProviderBedrock:
		o := bedrock.Options{API: u.API, BaseURL: u.URL, Region: u.Region, Aliases: aliases, Auth: u.Auth, APIKey: u.APIKey,
			Headers: u.Headers, Timeout: timeout, ForwardBaggage: cfg.ForwardBaggage}
		if u.Auth == config.AuthSigV4 {
			c, err := cl.awsCredentials()
			if err != nil {
				return nil, err
			}
			o.Credentials = c
		}
		return bedrock.New(o)
	case config.ProviderVertex:
		ts, err := cl.googleTokens()
		if err != nil {
			return nil, err
		}
		return vertex.New(vertex.Options{API: u.API, BaseURL: u.URL, Project: u.Project, Region: u.Region, Aliases: aliases, Tokens: ts,
			Headers: u.Headers, Timeout: timeout, ForwardBaggage: cfg.ForwardBaggage})
	}
	return upstream.New(upstream.Options{BaseURL: u.URL, APIKey: u.APIKey, Auth: u.Auth, Headers: u.Headers, Timeout: timeout, ForwardBaggage: cfg.ForwardBaggage})
}

func (cl *clouds) awsCredentials() (aws.CredentialsProvider, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.aws == nil {
		c, err := bedrock.LoadCredentials(context.Background())
		if err != nil {
			return nil, fmt.Errorf("AWS credentials: %w", err)
		}
		cl.aws = c
	}
	return cl.aws, nil
}

func (cl *clouds) googleTokens() (oauth2.TokenSource, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.google == nil {
		ts, err := vertex.DefaultTokenSource(context.Background())
		if err != nil {
			return nil, fmt.Errorf("Google credentials: %w", err)
		}
		cl.google = ts
	}
	return cl.google, nil
}

func (cl *clouds) entraCredential() (azcore.TokenCredential, error) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if cl.entra == nil {
		c, err := azure.DefaultCredential()
		if err != nil {
			return nil, fmt.Errorf("Entra ID credentials: %w", err)
		}
		cl.entra = c
	}
	return cl.entra, nil
}

// check tries, once and in the background, each credential the upstreams
// made, and logs a warning naming the cloud for one that cannot be had
// now: never fatal (an instance role may come up after Corral), and at
// request time such an upstream fails over. The returned stop cancels the
// check and waits for it. Nothing of a credential is logged.
func (cl *clouds) check(ctx context.Context, log *slog.Logger) (stop func()) {
	cl.mu.Lock()
	checks := map[string]func(context.Context) error{}
	if c := cl.aws; c != nil {
		checks["aws"] = func(ctx context.Context) error { _, err := c.Retrieve(ctx); return err }
	}
	if ts := cl.google; ts != nil {
		checks["google"] = func(context.Context) error { _, err := ts.Token(); return err }
	}
	if c := cl.entra; c != nil {
		checks["entra"] = func(ctx context.Context) error { return azure.Check(ctx, c) }
	}
	cl.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, upstream.CheckTimeout)
	var wg sync.WaitGroup
	for name, f := range checks {
		wg.Go(func() {
			if err := f(ctx); err != nil && ctx.Err() == nil {
				log.Warn("cloud credentials not available yet; those upstreams fail over until they are",
					slog.String("cloud", name), slog.String("error", err.Error()))
			}
		})
	}
	return func() {
		cancel()
		wg.Wait()
	}
}
