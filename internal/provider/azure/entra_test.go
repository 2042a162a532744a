package azure_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"

	"github.com/corralhq/corral/internal/provider/azure"
	"github.com/corralhq/corral/internal/provider/azure/azuretest"
	"github.com/corralhq/corral/internal/upstream"
)

func secretCredential(t *testing.T, s *azuretest.Server, secret string) azcore.TokenCredential {
	t.Helper()
	o := s.Options()
	c, err := azidentity.NewClientSecretCredential(o.TenantID, o.ClientID, secret, &azidentity.ClientSecretCredentialOptions{
		ClientOptions: azcore.ClientOptions{Cloud: cloud.Configuration{ActiveDirectoryAuthorityHost: s.AuthorityHost()},
			Transport: &http.Client{Transport: s.Transport()}},
		DisableInstanceDiscovery: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Entra ID tokens from azidentity against the fake token endpoint: one
// token serves many calls, and with tokens that live 5 min + 2 s (so
// both MSAL and Corral replace them 2 s after issue, the 5 minutes before
// expiry azcore's policy keeps) calls keep flowing across two refreshes
// with none refused.
func TestEntraTokensAcrossRefresh(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{TokenLifetime: 5*time.Minute + 2*time.Second})
	c := newClient(t, s, azure.Options{BaseURL: s.V1URL(), Auth: azure.AuthEntra, Credential: secretCredential(t, s, s.Options().ClientSecret)})
	deadline := time.Now().Add(30 * time.Second)
	calls := 0
	for s.TokensIssued() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d tokens issued after %d calls", s.TokensIssued(), calls)
		}
		code, _, got := do(t, c, upstream.Request{Path: "/embeddings", Body: []byte(`{"model":"gpt-4o","input":"x"}`)})
		calls++
		if code != 200 {
			t.Fatalf("call %d = %d %s", calls, code, got)
		}
	}
	if calls < 6 {
		t.Errorf("%d calls for 3 tokens; want tokens reused", calls)
	}
	for _, cl := range s.Calls() {
		if !strings.HasPrefix(cl.Header.Get("Authorization"), "Bearer entra-token-") || cl.Header.Get("Api-Key") != "" {
			t.Fatalf("call headers = %v", cl.Header)
		}
	}
}

// A wrong client secret is a credentials failure of the call (the router
// fails over), not an answer, and its text names no secret.
func TestEntraWrongSecret(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	c := newClient(t, s, azure.Options{BaseURL: s.V1URL(), Auth: azure.AuthEntra, Credential: secretCredential(t, s, "wrong-secret-31337")})
	_, err := c.Do(t.Context(), upstream.Request{Method: "POST", Path: "/embeddings", Header: http.Header{}, Body: []byte(`{"model":"gpt-4o","input":"x"}`)})
	if upstream.KindOf(err) != upstream.Connect || !strings.Contains(err.Error(), "AADSTS7000215") || strings.Contains(err.Error(), "wrong-secret-31337") {
		t.Errorf("err = %v", err)
	}
	if len(s.Calls()) != 0 {
		t.Errorf("%d calls reached Azure without a token", len(s.Calls()))
	}
}
