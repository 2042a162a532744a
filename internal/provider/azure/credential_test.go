package azure

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
)

// stubCredential hands out the tokens of its issue func, counting calls.
type stubCredential struct {
	mu    sync.Mutex // protects calls
	calls int
	issue func(n int) (azcore.AccessToken, error)
}

func (s *stubCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	s.mu.Lock()
	s.calls++
	n := s.calls
	s.mu.Unlock()
	if len(o.Scopes) != 1 || o.Scopes[0] != Scope {
		return azcore.AccessToken{}, errors.New("wrong scope")
	}
	return s.issue(n)
}

type clock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func authorize(t *testing.T, tk *tokens) (string, error) {
	t.Helper()
	r, _ := http.NewRequest("POST", "https://x.openai.azure.com/openai/v1/chat/completions", nil)
	err := tk.Authorize(context.Background(), r, nil)
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), err
}

// A token is reused until five minutes before it expires (or Entra ID's
// refresh_in), then replaced before it expires: no call ever carries an
// expired token.
func TestTokensRefreshBeforeExpiry(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	start := clk.now()
	cred := &stubCredential{issue: func(n int) (azcore.AccessToken, error) {
		tok := azcore.AccessToken{Token: "tok" + string(rune('0'+n)), ExpiresOn: clk.now().Add(time.Hour)}
		if n == 2 {
			tok.RefreshOn = clk.now().Add(10 * time.Minute)
		}
		return tok, nil
	}}
	tk := newTokens(cred, clk.now)
	tests := []struct {
		at   time.Duration // since start
		want string
	}{
		{0, "tok1"}, {30 * time.Minute, "tok1"}, {54*time.Minute + 59*time.Second, "tok1"},
		{55 * time.Minute, "tok2"},             // 5 min before tok1's expiry
		{64 * time.Minute, "tok2"},             // before tok2's refresh_in
		{65*time.Minute + time.Second, "tok3"}, // after it
	}
	for _, tt := range tests {
		clk.t = start.Add(tt.at)
		got, err := authorize(t, tk)
		if err != nil || got != tt.want {
			t.Errorf("at %v: %q, %v; want %q", tt.at, got, err, tt.want)
		}
	}
	if cred.calls != 3 {
		t.Errorf("GetToken calls = %d; want 3", cred.calls)
	}
}

// A failed refresh while the token is still usable sends the current
// token and waits 30 s before trying again; once the token is no longer
// usable the failure is the call's (a failover), naming no secret.
func TestTokensRefreshFailure(t *testing.T) {
	clk := &clock{t: time.Unix(1_800_000_000, 0)}
	fail := false
	cred := &stubCredential{issue: func(n int) (azcore.AccessToken, error) {
		if fail {
			return azcore.AccessToken{}, errors.New("AADSTS50058: no identity")
		}
		return azcore.AccessToken{Token: "secret-token-1", ExpiresOn: clk.now().Add(6 * time.Minute)}, nil
	}}
	tk := newTokens(cred, clk.now)
	if got, err := authorize(t, tk); err != nil || got != "secret-token-1" {
		t.Fatalf("first = %q, %v", got, err)
	}
	fail = true
	clk.add(2 * time.Minute) // due for refresh, still usable
	if got, err := authorize(t, tk); err != nil || got != "secret-token-1" {
		t.Errorf("failed refresh, usable token = %q, %v", got, err)
	}
	clk.add(10 * time.Second)
	authorize(t, tk)
	if cred.calls != 2 {
		t.Errorf("GetToken calls = %d; want 2 (no retry within 30 s)", cred.calls)
	}
	clk.add(4 * time.Minute) // 30 s before expiry: no longer usable
	_, err := authorize(t, tk)
	if err == nil || !strings.Contains(err.Error(), "AADSTS50058") || strings.Contains(err.Error(), "secret-token") {
		t.Errorf("expired and failing = %v", err)
	}
}

// Concurrent calls share one refresh.
func TestTokensOneRefreshAtATime(t *testing.T) {
	release := make(chan struct{})
	cred := &stubCredential{issue: func(int) (azcore.AccessToken, error) {
		<-release
		return azcore.AccessToken{Token: "t", ExpiresOn: time.Now().Add(time.Hour)}, nil
	}}
	tk := newTokens(cred, time.Now)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got, err := authorize(t, tk); err != nil || got != "t" {
				t.Errorf("= %q, %v", got, err)
			}
		})
	}
	close(release)
	wg.Wait()
	if cred.calls != 1 {
		t.Errorf("GetToken calls = %d; want 1", cred.calls)
	}
}

func TestCustomAuthority(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"", false},
		{"https://login.microsoftonline.com/", false},
		{"https://login.microsoftonline.us/", false},
		{"https://login.chinacloudapi.cn/", false},
		{"https://127.0.0.1:8443/", true},
		{"https://login.contoso-stack.local/", true},
	}
	for _, tt := range tests {
		if got := customAuthority(tt.give); got != tt.want {
			t.Errorf("customAuthority(%q) = %v; want %v", tt.give, got, tt.want)
		}
	}
}

// With no identity configured, DefaultCredential still succeeds (an
// identity may come up after Corral) and Check reports the failure.
func TestDefaultCredentialWithoutIdentity(t *testing.T) {
	for _, k := range []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH",
		"AZURE_FEDERATED_TOKEN_FILE", "AZURE_USERNAME", "AZURE_AUTHORITY_HOST", "IDENTITY_ENDPOINT", "MSI_ENDPOINT", "AZURE_TOKEN_CREDENTIALS"} {
		t.Setenv(k, "")
	}
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "prod") // no developer CLIs on a test machine
	c, err := DefaultCredential()
	if err != nil || c == nil {
		t.Fatalf("DefaultCredential = %v, %v", c, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := Check(ctx, c); err == nil {
		t.Error("Check with no identity succeeded")
	}
}
