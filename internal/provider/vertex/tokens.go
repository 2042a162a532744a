package vertex

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"
)

// Scope is the OAuth2 scope Corral asks Google for, as anthropic-sdk-go
// does: external-account credentials mint no token without one.
const Scope = "https://www.googleapis.com/auth/cloud-platform"

// tokenTimeout bounds one token grant (a POST to the credentials'
// token_uri, or the metadata server's token call): oauth2.TokenSource
// takes no context, so this is what keeps a stuck grant from holding every
// Vertex call behind it.
const tokenTimeout = 30 * time.Second

// maxEarly is how long before its expiry a token is replaced, at most:
// x/oauth2's own margin. A token that lives shorter is replaced when a
// quarter of its life is left, so one grant serves most of its life and no
// request carries a token about to lapse.
const maxEarly = 10 * time.Second

// retryAfter is how long a token still in hand is used after its renewal
// failed, before the next try.
const retryAfter = 2 * time.Second

// DefaultTokenSource is the process's Google application default
// credentials (service-account or external-account JSON, workload
// identity, the metadata server) for the cloud-platform scope, refreshed
// before each token expires.
//
// It is golang.org/x/oauth2/google's FindDefaultCredentials, the library
// anthropic-sdk-go's vertex package takes its credentials from (and whose
// oauth2.TokenSource the rest of Corral already speaks), rather than
// cloud.google.com/go/auth, whose cached provider refreshes 3m45s early:
// with a token that lives less than that it would mint one per call.
//
// The credentials are looked up on first use, not here: with none yet (a
// workload identity that comes up after Corral, a file mounted later)
// construction succeeds, each call fails as a connection failure of its
// upstream (which fails over), and the start-up check warns. Once found,
// they are kept; tokens are reused until they near expiry and replaced by
// one grant however many calls are waiting for it.
func DefaultTokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	hc := &http.Client{Timeout: tokenTimeout}
	// The lookup's context outlives this call: the credentials' token
	// source fetches through it for as long as the process runs.
	find := func() (oauth2.TokenSource, error) {
		c, err := google.FindDefaultCredentials(context.WithValue(context.WithoutCancel(ctx), oauth2.HTTPClient, hc), Scope)
		if err != nil {
			return nil, err
		}
		return c.TokenSource, nil
	}
	return newTokenCache(find, time.Now), nil
}

// tokenCache reuses a token until it nears expiry and fetches the next
// one once for every caller; it finds its source on first success.
type tokenCache struct {
	find func() (oauth2.TokenSource, error)
	now  func() time.Time
	// lock is held (a token in it) while the source is found or a token
	// fetched, and guards src, tok and renew.
	lock  chan struct{}
	src   oauth2.TokenSource
	tok   *oauth2.Token
	renew time.Time // when tok is replaced
}

func newTokenCache(find func() (oauth2.TokenSource, error), now func() time.Time) *tokenCache {
	return &tokenCache{find: find, now: now, lock: make(chan struct{}, 1)}
}

// Token is the current token, fetched anew once it nears expiry.
func (c *tokenCache) Token() (*oauth2.Token, error) { return c.token(context.Background()) }

// token is Token; a caller waiting for another's fetch leaves when ctx
// ends.
func (c *tokenCache) token(ctx context.Context) (*oauth2.Token, error) {
	select {
	case c.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
	defer func() { <-c.lock }()
	now := c.now()
	if c.tok != nil && now.Before(c.renew) {
		return c.tok, nil
	}
	if c.src == nil {
		src, err := c.find()
		if err != nil {
			return nil, fmt.Errorf("vertex: application default credentials: %w", err)
		}
		c.src = src
	}
	tok, err := c.src.Token()
	switch {
	case err != nil && c.tok != nil && now.Before(c.tok.Expiry):
		// The token in hand still holds: keep it, and try again after
		// retryAfter (or at its expiry), not on every call in between, so
		// a token endpoint that fails slowly costs one wait, not one per
		// call.
		c.renew = now.Add(retryAfter)
		if c.tok.Expiry.Before(c.renew) {
			c.renew = c.tok.Expiry
		}
		return c.tok, nil
	case err != nil:
		return nil, fmt.Errorf("vertex: token: %w", err)
	case tok.AccessToken == "":
		return nil, errors.New("vertex: token: an empty access token")
	}
	c.tok, c.renew = tok, renewal(now, tok.Expiry)
	return tok, nil
}

// renewal is when a token got at now that expires at expiry is replaced.
func renewal(now, expiry time.Time) time.Time {
	if expiry.IsZero() {
		return time.Unix(1<<62, 0) // never expires
	}
	early := min(maxEarly, expiry.Sub(now)/4)
	return expiry.Add(-early)
}

// bearer authorizes each call with the token source's token.
type bearer struct{ ts oauth2.TokenSource }

// Authorize sets Authorization: Bearer <token>. Its errors name the
// credentials' trouble, never a token.
func (b bearer) Authorize(ctx context.Context, r *http.Request, _ []byte) error {
	var tok *oauth2.Token
	var err error
	if c, ok := b.ts.(*tokenCache); ok {
		tok, err = c.token(ctx)
	} else {
		tok, err = b.ts.Token()
	}
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}
