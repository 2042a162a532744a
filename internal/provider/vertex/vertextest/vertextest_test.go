package vertextest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/anthropics/anthropic-sdk-go/v2/vertex"
	"github.com/tidwall/gjson"
	"golang.org/x/oauth2/google"
)

const modelID = "claude-sonnet-4-5@20250929"

// sdkClient is anthropic-sdk-go's own Vertex client with the credentials
// of key file creds, its base URL the fake's.
func sdkClient(t *testing.T, s *Server, creds []byte) anthropic.Client {
	t.Helper()
	c, err := google.CredentialsFromJSONWithType(context.Background(), creds, google.ServiceAccount, cloudPlatform)
	if err != nil {
		t.Fatal(err)
	}
	return anthropic.NewClient(
		vertex.WithCredentials(context.Background(), s.opts.Region, s.opts.Project, c),
		option.WithBaseURL(s.URL),
		option.WithMaxRetries(0),
	)
}

func params() anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     modelID,
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))},
	}
}

// TestSDKVertex: anthropic-sdk-go's vertex client, with credentials from
// the fake's key file, gets a token by the JWT-bearer grant and then
// Messages, a streamed Messages and CountTokens answers; the fake saw the
// SDK's envelope (the model in the URL, anthropic_version in the body, the
// token it issued).
func TestSDKVertex(t *testing.T) {
	s := New(t, Options{})
	creds, err := os.ReadFile(s.CredentialsFile)
	if err != nil {
		t.Fatal(err)
	}
	client := sdkClient(t, s, creds)
	ctx := context.Background()
	base := "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/"

	msg, err := client.Messages.New(ctx, params())
	if err != nil {
		t.Fatal(err)
	}
	if got := msg.Content[0].Text; got != "Vertex heard: hello there" || msg.Model != "claude-sonnet-4-5-20250929" {
		t.Errorf("message = %q from %q", got, msg.Model)
	}
	first := s.Requests()[0]
	if first.Path != base+modelID+":rawPredict" || first.Status != 200 {
		t.Errorf("rawPredict call: %s → %d", first.Path, first.Status)
	}
	if b := gjson.ParseBytes(first.Body); b.Get("model").Exists() || b.Get("anthropic_version").String() == "" {
		t.Errorf("rawPredict body %s: want no model and an anthropic_version", first.Body)
	}
	if tok, _ := strings.CutPrefix(first.Header.Get("Authorization"), "Bearer "); len(s.Tokens()) != 1 || tok != s.Tokens()[0] {
		t.Errorf("Authorization %q; want the one token issued", first.Header.Get("Authorization"))
	}

	stream := client.Messages.NewStreaming(ctx, params())
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if got := acc.Content[0].Text; got != "Vertex heard: hello there" {
		t.Errorf("streamed text = %q", got)
	}
	if p := s.Requests()[1].Path; p != base+modelID+":streamRawPredict" {
		t.Errorf("stream call path %s", p)
	}

	n, err := client.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{
		Model:    modelID,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello there"))},
	})
	if err != nil {
		t.Fatal(err)
	}
	ct := s.Requests()[2]
	if ct.Path != base+"count-tokens:rawPredict" || gjson.GetBytes(ct.Body, "model").String() != modelID || n.InputTokens <= 0 {
		t.Errorf("count tokens: %s %s → %d", ct.Path, ct.Body, n.InputTokens)
	}
	if g := s.Grants(); g != 1 {
		t.Errorf("grants = %d for three calls with an hour-long token; want 1", g)
	}
}

// TestSDKForgedKey: the SDK with a key file for the same account but
// another key signs an assertion the fake refuses; no API call is made.
func TestSDKForgedKey(t *testing.T) {
	s := New(t, Options{})
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	client := sdkClient(t, s, s.CredentialsJSON(other))
	_, err = client.Messages.New(context.Background(), params())
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("forged key: err = %v; want invalid_grant", err)
	}
	if s.RefusedGrants() != 1 || s.Grants() != 0 || s.Calls() != 0 {
		t.Errorf("refused %d, granted %d, API calls %d; want 1, 0, 0", s.RefusedGrants(), s.Grants(), s.Calls())
	}
}

// TestAPIRefusesTokens: a call with no token, a token the fake never
// issued, or one that expired gets Google's 401.
func TestAPIRefusesTokens(t *testing.T) {
	s := New(t, Options{TokenLifetime: time.Minute})
	live := grant(t, s, s.sign(s.key, s.claims(nil)))
	call := func(auth string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/"+modelID+":rawPredict",
			strings.NewReader(`{"anthropic_version":"vertex-2023-10-16","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`))
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, gjson.GetBytes(b, "error.status").String()
	}
	tests := []struct {
		name string
		give string
		want int
	}{
		{"live token", "Bearer " + live, 200},
		{"no token", "", 401},
		{"unknown token", "Bearer ya29.c.forged", 401},
		{"not bearer", "Basic " + live, 401},
	}
	for _, tt := range tests {
		if code, status := call(tt.give); code != tt.want || (tt.want == 401 && status != "UNAUTHENTICATED") {
			t.Errorf("%s: %d %s; want %d", tt.name, code, status, tt.want)
		}
	}
	s.mu.Lock()
	s.ahead = time.Minute + time.Second
	s.mu.Unlock()
	if code, status := call("Bearer " + live); code != 401 || status != "UNAUTHENTICATED" {
		t.Errorf("expired token: %d %s; want 401 UNAUTHENTICATED", code, status)
	}
}

// TestTokenEndpointChecks: each claim Google checks, wrong, is refused.
func TestTokenEndpointChecks(t *testing.T) {
	s := New(t, Options{})
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	now := time.Now().Unix()
	tests := []struct {
		name string
		give string
		want string
	}{
		{"good", s.sign(s.key, s.claims(nil)), ""},
		{"other key", s.sign(other, s.claims(nil)), "invalid_grant"},
		{"other issuer", s.sign(s.key, s.claims(map[string]any{"iss": "x@y.iam.gserviceaccount.com"})), "invalid_grant"},
		{"other audience", s.sign(s.key, s.claims(map[string]any{"aud": "https://oauth2.googleapis.com/token"})), "invalid_grant"},
		{"no scope", s.sign(s.key, s.claims(map[string]any{"scope": ""})), "invalid_scope"},
		{"expired", s.sign(s.key, s.claims(map[string]any{"iat": now - 7200, "exp": now - 3600})), "invalid_grant"},
		{"too long", s.sign(s.key, s.claims(map[string]any{"exp": now + 7200})), "invalid_grant"},
		{"issued in the future", s.sign(s.key, s.claims(map[string]any{"iat": now + 3600, "exp": now + 3700})), "invalid_grant"},
		{"tampered", tamper(s.sign(s.key, s.claims(nil))), "invalid_grant"},
	}
	for _, tt := range tests {
		code, _ := s.verify(tt.give, time.Now())
		if code != tt.want {
			t.Errorf("%s: %q; want %q", tt.name, code, tt.want)
		}
	}
	resp, err := http.PostForm(s.URL+"/token", url.Values{"grant_type": {"client_credentials"}, "assertion": {tests[0].give}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || gjson.GetBytes(b, "error").String() != "unsupported_grant_type" {
		t.Errorf("another grant type: %d %s", resp.StatusCode, b)
	}
}

// claims is a good claim set for the fake's account with set changed.
func (s *Server) claims(set map[string]any) map[string]any {
	now := time.Now().Unix()
	c := map[string]any{"iss": s.Email, "aud": s.tokenURI, "scope": cloudPlatform, "iat": now - 10, "exp": now + 3590}
	for k, v := range set {
		c[k] = v
	}
	return c
}

// sign is an RS256 JWT of claims signed with key.
func (s *Server) sign(key *rsa.PrivateKey, claims map[string]any) string {
	h, _ := json.Marshal(map[string]string{"alg": "RS256", "typ": "JWT", "kid": s.keyID})
	c, _ := json.Marshal(claims)
	in := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(c)
	sum := sha256.Sum256([]byte(in))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	return in + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// tamper widens a signed JWT's scope claim, keeping its signature.
func tamper(jwt string) string {
	parts := strings.Split(jwt, ".")
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	b = []byte(strings.Replace(string(b), `"scope":"`, `"scope":"openid `, 1))
	return parts[0] + "." + base64.RawURLEncoding.EncodeToString(b) + "." + parts[2]
}

// grant exchanges assertion for an access token.
func grant(t *testing.T, s *Server, assertion string) string {
	t.Helper()
	resp, err := http.PostForm(s.URL+"/token", url.Values{"grant_type": {jwtBearer}, "assertion": {assertion}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	tok := gjson.GetBytes(b, "access_token").String()
	if resp.StatusCode != 200 || tok == "" || gjson.GetBytes(b, "expires_in").Int() != 60 {
		t.Fatalf("grant: %d %s", resp.StatusCode, b)
	}
	return tok
}
