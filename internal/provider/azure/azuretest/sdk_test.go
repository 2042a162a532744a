package azuretest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/cloud"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/azure"
	"github.com/openai/openai-go/v3/option"

	"github.com/corralhq/corral/internal/provider/azure/azuretest"
)

// The fake is validated against openai-go's own Azure client: its azure
// option (classic API: deployment in the path, api-version in the query)
// with an api-key and with an azidentity ClientSecretCredential pointed at
// the fake Entra ID; the v1 API as Microsoft documents it for the OpenAI
// client (base URL .../openai/v1/, api-key header). Each talks to the fake
// successfully, streamed and not, and wrong credentials are refused.

func chat(t *testing.T, c openai.Client, model string) (string, error) {
	t.Helper()
	r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
	if err != nil {
		return "", err
	}
	return r.Choices[0].Message.Content + "|" + r.Model, nil
}

func chatStream(t *testing.T, c openai.Client, model string) string {
	t.Helper()
	st := c.Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{Model: model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("stream please")}})
	var acc openai.ChatCompletionAccumulator
	for st.Next() {
		acc.AddChunk(st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return acc.Choices[0].Message.Content + "|" + string(acc.Choices[0].FinishReason)
}

func codeOf(err error) string {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.Code + ": " + e.Message
	}
	return ""
}

func statusOf(err error) int {
	var e *openai.Error
	if errors.As(err, &e) {
		return e.StatusCode
	}
	return 0
}

func TestOpenAIGoAzureWithAPIKey(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	hc := option.WithHTTPClient(&http.Client{Transport: s.Transport()})
	c := openai.NewClient(azure.WithEndpoint(s.Endpoint(), "2024-10-21"), azure.WithAPIKey(s.Options().APIKey), hc, option.WithMaxRetries(0))
	got, err := chat(t, c, "gpt-4o")
	if want := "Azure gpt-4o-2024-08-06 says: hello there|gpt-4o-2024-08-06"; err != nil || got != want {
		t.Fatalf("chat = %q, %v; want %q", got, err, want)
	}
	if got, want := chatStream(t, c, "gpt-4o"), "Azure gpt-4o-2024-08-06 says: stream please|stop"; got != want {
		t.Errorf("stream = %q; want %q", got, want)
	}
	calls := s.CallsTo("/openai/deployments/gpt-4o/chat/completions")
	if len(calls) != 2 || calls[0].RawQuery != "api-version=2024-10-21" || calls[0].Header.Get("Api-Key") != s.Options().APIKey {
		t.Errorf("calls = %+v", calls)
	}

	bad := openai.NewClient(azure.WithEndpoint(s.Endpoint(), "2024-10-21"), azure.WithAPIKey("wrong-key"), hc, option.WithMaxRetries(0))
	if _, err := chat(t, bad, "gpt-4o"); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("wrong key: %v; want 401", err)
	}
	if _, err := chat(t, c, "no-such-deployment"); statusOf(err) != http.StatusNotFound || !strings.HasPrefix(codeOf(err), "DeploymentNotFound: ") {
		t.Errorf("unknown deployment: %v; want 404 DeploymentNotFound", err)
	}
	old := openai.NewClient(azure.WithEndpoint(s.Endpoint(), "2019-01-01"), azure.WithAPIKey(s.Options().APIKey), hc, option.WithMaxRetries(0))
	if _, err := chat(t, old, "gpt-4o"); statusOf(err) != http.StatusBadRequest || codeOf(err) != "BadRequest: API version not supported" {
		t.Errorf("unsupported api-version: %v; want 400", err)
	}
}

func credential(t *testing.T, s *azuretest.Server, secret string) azcore.TokenCredential {
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

func TestOpenAIGoAzureWithEntraToken(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	hc := option.WithHTTPClient(&http.Client{Transport: s.Transport()})
	c := openai.NewClient(azure.WithEndpoint(s.Endpoint(), "2024-10-21"), azure.WithTokenCredential(credential(t, s, s.Options().ClientSecret)), hc, option.WithMaxRetries(0))
	if got, err := chat(t, c, "gpt-4o"); err != nil || !strings.HasPrefix(got, "Azure gpt-4o-2024-08-06 says") {
		t.Fatalf("chat = %q, %v", got, err)
	}
	if got := chatStream(t, c, "gpt-4o"); got != "Azure gpt-4o-2024-08-06 says: stream please|stop" {
		t.Errorf("stream = %q", got)
	}
	if n := s.TokensIssued(); n != 1 {
		t.Errorf("tokens issued = %d; want 1 (cached across calls)", n)
	}
	calls := s.CallsTo("/openai/deployments/gpt-4o/chat/completions")
	if len(calls) != 2 || !strings.HasPrefix(calls[0].Header.Get("Authorization"), "Bearer entra-token-") {
		t.Errorf("calls = %+v", calls)
	}

	bad := openai.NewClient(azure.WithEndpoint(s.Endpoint(), "2024-10-21"), azure.WithTokenCredential(credential(t, s, "wrong-secret")), hc, option.WithMaxRetries(0))
	_, err := chat(t, bad, "gpt-4o")
	var af *azidentity.AuthenticationFailedError
	if !errors.As(err, &af) || !strings.Contains(err.Error(), "AADSTS7000215") {
		t.Errorf("wrong secret: %v; want Entra ID's invalid_client", err)
	}
	// A token Entra ID never issued is refused by the resource.
	forged := openai.NewClient(option.WithBaseURL(s.V1URL()), option.WithAPIKey("entra-token-forged"), hc, option.WithMaxRetries(0))
	if _, err := chat(t, forged, "gpt-4o"); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("forged token: %v; want 401", err)
	}
}

func TestOpenAIGoV1API(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	hc := option.WithHTTPClient(&http.Client{Transport: s.Transport()})
	c := openai.NewClient(option.WithBaseURL(s.V1URL()+"/"), option.WithHeader("api-key", s.Options().APIKey), hc, option.WithMaxRetries(0))
	if got, err := chat(t, c, "gpt-4o"); err != nil || got != "Azure gpt-4o-2024-08-06 says: hello there|gpt-4o-2024-08-06" {
		t.Fatalf("v1 chat = %q, %v", got, err)
	}
	if got := chatStream(t, c, "gpt-4o"); got != "Azure gpt-4o-2024-08-06 says: stream please|stop" {
		t.Errorf("v1 stream = %q", got)
	}
	if _, err := chat(t, c, "gpt-35"); statusOf(err) != http.StatusNotFound {
		t.Errorf("v1 unknown deployment: %v; want 404", err)
	}
	bad := openai.NewClient(option.WithBaseURL(s.V1URL()+"/"), option.WithHeader("api-key", "nope"), hc, option.WithMaxRetries(0))
	if _, err := chat(t, bad, "gpt-4o"); statusOf(err) != http.StatusUnauthorized {
		t.Errorf("v1 wrong key: %v; want 401", err)
	}
}

// The resource refuses a token once it has expired, as Azure does.
func TestExpiredTokenRefused(t *testing.T) {
	var mu sync.Mutex // protects now
	now := time.Unix(1_800_000_000, 0)
	s := azuretest.New(t, azuretest.Options{TokenLifetime: time.Hour, Now: func() time.Time { mu.Lock(); defer mu.Unlock(); return now }})
	hc := &http.Client{Transport: s.Transport()}
	o := s.Options()
	resp, err := hc.PostForm(s.AuthorityHost()+o.TenantID+"/oauth2/v2.0/token", url.Values{"grant_type": {"client_credentials"},
		"client_id": {o.ClientID}, "client_secret": {o.ClientSecret}, "scope": {"https://cognitiveservices.azure.com/.default"}})
	if err != nil {
		t.Fatal(err)
	}
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int    `json:"expires_in"`
	}
	err = json.NewDecoder(resp.Body).Decode(&tok)
	resp.Body.Close()
	if err != nil || tok.ExpiresIn != 3600 {
		t.Fatalf("token = %+v, %v", tok, err)
	}
	call := func() int {
		req, _ := http.NewRequest("POST", s.V1URL()+"/embeddings", strings.NewReader(`{"model":"gpt-4o","input":"x"}`))
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := call(); got != 200 {
		t.Fatalf("fresh token = %d", got)
	}
	mu.Lock()
	now = now.Add(time.Hour)
	mu.Unlock()
	if got := call(); got != 401 {
		t.Errorf("expired token = %d; want 401", got)
	}
}
