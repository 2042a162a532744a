package azure

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
)

// Scope is the Entra ID scope of Azure OpenAI tokens (openai-go's azure
// option's default).
const Scope = "https://cognitiveservices.azure.com/.default"

// microsoftAuthorities are the Entra ID authority hosts Microsoft runs
// (MSAL's trusted list): instance discovery validates them.
var microsoftAuthorities = map[string]bool{
	"login.microsoftonline.com": true, "login.windows.net": true, "login.microsoft.com": true,
	"sts.windows.net": true, "login.chinacloudapi.cn": true, "login.microsoftonline.de": true,
	"login-us.microsoftonline.com": true, "login.microsoftonline.us": true,
}

// DefaultCredential is azidentity's default chain (client secret or
// certificate, workload identity, managed identity) for the process. It
// succeeds with no identity configured yet: the chain then fails at
// GetToken (a start-up warning, a failover at request time), so an
// identity that comes up after Corral is picked up without a restart.
//
// With AZURE_AUTHORITY_HOST naming a host that is not one of Microsoft's
// (a private or disconnected cloud), instance discovery is turned off:
// it asks login.microsoftonline.com to vouch for the host, which only
// knows Microsoft's own, so such a host could never be used otherwise.
// The operator who set the variable vouches for it instead.
func DefaultCredential() (azcore.TokenCredential, error) {
	o := &azidentity.DefaultAzureCredentialOptions{DisableInstanceDiscovery: customAuthority(os.Getenv("AZURE_AUTHORITY_HOST"))}
	c, err := azidentity.NewDefaultAzureCredential(o)
	if err != nil {
		return nil, fmt.Errorf("azure: %w", err)
	}
	return c, nil
}

// customAuthority reports whether host (AZURE_AUTHORITY_HOST) is set and
// names a host outside Microsoft's authorities.
func customAuthority(host string) bool {
	if host == "" {
		return false
	}
	u, err := url.Parse(host)
	if err != nil {
		return false
	}
	return !microsoftAuthorities[strings.ToLower(u.Hostname())]
}

// Check asks c for a token once (the start-up check). The error names no
// secret: azidentity's messages carry Entra ID's error codes, not the
// credentials.
func Check(ctx context.Context, c azcore.TokenCredential) error {
	if _, err := c.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Scope}}); err != nil {
		return fmt.Errorf("azure: entra token: %w", err)
	}
	return nil
}

// Token refresh timing, as azcore's bearer token policy has it.
const (
	// refreshBefore is how long before its expiry a token is replaced
	// (when Entra ID sent no refresh_in).
	refreshBefore = 5 * time.Minute
	// usableFor is the least life a token must have left to be sent: a
	// call must reach Azure before the token expires.
	usableFor = 30 * time.Second
	// retryAfter is how long a failed refresh waits before the next try
	// while the current token is still usable.
	retryAfter = 30 * time.Second
)

// tokens is the upstream.Authorizer of auth entra: a bearer token from
// the credential, cached and replaced before it expires. The credential's
// own cache (MSAL's, for azidentity's service-principal, workload and
// managed identities) is behind it; this one also covers credentials that
// keep none (the developer CLIs) and spares every call the credential's
// lock. One refresh runs at a time; calls meanwhile send the current token
// while it is usable.
type tokens struct {
	cred azcore.TokenCredential
	now  func() time.Time
	sem  chan struct{} // held by the one refresh in flight

	mu      sync.Mutex // protects tok, refresh and retry
	tok     azcore.AccessToken
	refresh time.Time // when tok is to be replaced
	retry   time.Time // a failed refresh's next try
}

func newTokens(c azcore.TokenCredential, now func() time.Time) *tokens {
	return &tokens{cred: c, now: now, sem: make(chan struct{}, 1)}
}

var _ interface {
	Authorize(context.Context, *http.Request, []byte) error
} = (*tokens)(nil)

// Authorize sets r's Authorization to a current Entra ID token.
func (t *tokens) Authorize(ctx context.Context, r *http.Request, _ []byte) error {
	tok, err := t.token(ctx)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok)
	return nil
}

// cached is the current token when it need not be refreshed (fresh), or
// when it is still usable and a failed refresh waits before its next try
// (waiting).
func (t *tokens) cached() (tok string, fresh, waiting bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if t.tok.Token == "" || !now.Add(usableFor).Before(t.tok.ExpiresOn) {
		return "", false, false
	}
	return t.tok.Token, now.Before(t.refresh), now.Before(t.retry)
}

func (t *tokens) token(ctx context.Context) (string, error) {
	if tok, fresh, waiting := t.cached(); fresh || waiting {
		return tok, nil
	}
	select {
	case t.sem <- struct{}{}:
	default:
		// A refresh is in flight: send the current token while it is
		// usable rather than wait for it.
		if tok, ok := t.usable(); ok {
			return tok, nil
		}
		select {
		case t.sem <- struct{}{}:
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
	defer func() { <-t.sem }()
	if tok, fresh, _ := t.cached(); fresh {
		return tok, nil // refreshed while this call waited
	}
	at, err := t.cred.GetToken(ctx, policy.TokenRequestOptions{Scopes: []string{Scope}})
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	if err != nil || at.Token == "" {
		if err == nil {
			err = errors.New("empty token")
		}
		if t.tok.Token != "" && now.Add(usableFor).Before(t.tok.ExpiresOn) && ctx.Err() == nil {
			t.retry = now.Add(retryAfter)
			return t.tok.Token, nil
		}
		return "", fmt.Errorf("azure: entra token: %w", err)
	}
	t.tok, t.retry = at, time.Time{}
	t.refresh = at.ExpiresOn.Add(-refreshBefore)
	if !at.RefreshOn.IsZero() && at.RefreshOn.Before(t.refresh) {
		t.refresh = at.RefreshOn
	}
	return at.Token, nil
}

// usable is the current token when it has life enough left to be sent.
func (t *tokens) usable() (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tok.Token == "" || !t.now().Add(usableFor).Before(t.tok.ExpiresOn) {
		return "", false
	}
	return t.tok.Token, true
}
