package bedrock_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/provider/bedrock"
	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
	"github.com/corralhq/corral/internal/upstream"
)

var (
	_ failover.Doer   = (*bedrock.Client)(nil)
	_ failover.Scoped = (*bedrock.Client)(nil)
)

const profileID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

var aliases = []provider.Alias{{Glob: "claude-sonnet-4-5*", ID: profileID}}

// newClient is a sigv4 Client for api in front of fake, with fake's key
// and secret.
func newClient(t *testing.T, fake *bedrocktest.Server, api, secret string) *bedrock.Client {
	t.Helper()
	c, err := bedrock.New(bedrock.Options{API: api, BaseURL: fake.URL, Region: bedrocktest.DefaultRegion, Aliases: aliases,
		Auth: "sigv4", Credentials: credentials.NewStaticCredentialsProvider(bedrocktest.DefaultAccessKeyID, secret, "tok-1"),
		Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// do sends body (with hdr) as a POST of path and returns the status, the
// header and the whole body.
func do(t *testing.T, c *bedrock.Client, path, body string, hdr http.Header) (int, http.Header, string) {
	t.Helper()
	if hdr == nil {
		hdr = http.Header{}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Do(ctx, upstream.Request{Method: http.MethodPost, Path: path, Header: hdr, Body: []byte(body), Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// TestEnvelopeBytes: Bedrock receives the client's body with exactly the
// SDK's edits: model and stream gone, anthropic_version from the header
// (or the default), anthropic_beta from the headers, user_profile_id
// from anthropic-user-profile-id; an unknown field's
// odd number literal and a cache_control's ttl are the client's bytes.
// The path carries the alias's id; the headers moved into the body, and
// the client's X-Amz-* headers, are not sent.
func TestEnvelopeBytes(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]`
	tests := []struct {
		name string
		give string
		hdr  http.Header
		want string
	}{
		{"no version header: the default", `{"model":"claude-sonnet-4-5","max_tokens":64,"x_odd":1.50e+00,` + msgs + `}`, nil,
			`{"max_tokens":64,"x_odd":1.50e+00,` + msgs + `,"anthropic_version":"bedrock-2023-05-31"}`},
		{"header version and betas", `{ "max_tokens" : 64 , "model":"claude-sonnet-4-5",` + msgs + ` }`,
			http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"a-2025-01-01, b-2025-02-02", "c"}},
			`{ "max_tokens" : 64 ,` + msgs + ` ,"anthropic_version":"2023-06-01","anthropic_beta":["a-2025-01-01","b-2025-02-02","c"]}`},
		{"the body's own version stays", `{"anthropic_version":"bedrock-2023-05-31","model":"claude-sonnet-4-5","max_tokens":64,` + msgs + `}`,
			http.Header{"Anthropic-Version": {"2023-06-01"}, "X-Amz-Security-Token": {"client-token"}, "X-Amzn-Bedrock-Guardrailidentifier": {"g"}},
			`{"anthropic_version":"bedrock-2023-05-31","max_tokens":64,` + msgs + `}`},
		{"a user profile id joins the body", `{"model":"claude-sonnet-4-5","stream":false,"max_tokens":64,` + msgs + `}`,
			http.Header{"Anthropic-User-Profile-Id": {"prof_1"}},
			`{"max_tokens":64,` + msgs + `,"anthropic_version":"bedrock-2023-05-31","user_profile_id":"prof_1"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := bedrocktest.New(t, bedrocktest.Options{SessionToken: "tok-1"})
			c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
			if code, _, body := do(t, c, "/messages", tt.give, tt.hdr); code != 200 {
				t.Fatalf("status %d: %s", code, body)
			}
			call := fake.Calls()[0]
			if string(call.Body) != tt.want {
				t.Errorf("body at Bedrock =\n%s\nwant\n%s", call.Body, tt.want)
			}
			if call.Path != "/model/"+profileID+"/invoke" {
				t.Errorf("path = %s", call.Path)
			}
			for _, k := range []string{"Anthropic-Version", "Anthropic-Beta", "Anthropic-User-Profile-Id", "X-Amzn-Bedrock-Guardrailidentifier"} {
				if v := call.Header.Get(k); v != "" {
					t.Errorf("%s = %q sent", k, v)
				}
			}
			if v := call.Header.Get("X-Amz-Security-Token"); v != "tok-1" {
				t.Errorf("X-Amz-Security-Token = %q; want Corral's", v)
			}
		})
	}
}

// TestInvoke: a non-streamed Messages answer is Bedrock's body as sent,
// the provider's model kept.
func TestInvoke(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
	code, h, body := do(t, c, "/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"ping"}]}`, nil)
	if code != 200 || h.Get("Content-Type") != "application/json" ||
		body != `{"content":[{"text":"bedrock reply to: ping","type":"text"}],"id":"`+gjsonID(body)+`","model":"claude-sonnet-4-5-20250929","role":"assistant","stop_reason":"end_turn","stop_sequence":null,"type":"message","usage":{"input_tokens":4,"output_tokens":4}}` {
		t.Errorf("%d %v %s", code, h, body)
	}
}

// TestErrors: Bedrock's error answers reach the client in its API's
// shape with Bedrock's status and Retry-After; a refusal of Corral's
// signature stays 403 (the server makes it 502).
func TestErrors(t *testing.T) {
	tests := []struct {
		name, api, secret, path string
		reply                   bedrocktest.Reply
		want                    int
		wantBody, retry         string
	}{
		{"throttled", provider.Anthropic, bedrocktest.DefaultSecretAccessKey, "/messages",
			bedrocktest.Reply{Status: 429, Error: "ThrottlingException", Message: "Too many tokens, please wait before trying again.", RetryAfter: "3"},
			429, `{"type":"error","error":{"type":"rate_limit_error","message":"Too many tokens, please wait before trying again."}}`, "3"},
		{"wrong secret", provider.Anthropic, "wrong", "/messages", bedrocktest.Reply{},
			403, `{"type":"error","error":{"type":"permission_error","message":"The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}}`, ""},
		{"openai validation", provider.OpenAI, bedrocktest.DefaultSecretAccessKey, "/chat/completions",
			bedrocktest.Reply{Status: 400, Error: "ValidationException", Message: "max_tokens is too large"},
			400, `{"error":{"message":"max_tokens is too large","type":"invalid_request_error","param":null,"code":"ValidationException"}}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := bedrocktest.New(t, bedrocktest.Options{Reply: func(bedrocktest.Call) bedrocktest.Reply { return tt.reply }})
			c := newClient(t, fake, tt.api, tt.secret)
			code, h, body := do(t, c, tt.path, `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`, nil)
			if code != tt.want || body != tt.wantBody || h.Get("Retry-After") != tt.retry {
				t.Errorf("%d %s (Retry-After %q); want %d %s", code, body, h.Get("Retry-After"), tt.want, tt.wantBody)
			}
		})
	}
}

// TestOpenAI: Bedrock's OpenAI-compatible chat gets the client's body
// with only the model replaced by the alias's id, stream kept, and its
// answer comes back as sent.
func TestOpenAI(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	c := newClient(t, fake, provider.OpenAI, bedrocktest.DefaultSecretAccessKey)
	code, h, body := do(t, c, "/chat/completions", `{"model": "claude-sonnet-4-5", "stream":true, "temperature":7.0E-1,"messages":[{"role":"user","content":"hi"}]}`, nil)
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || countData(body) != 7 || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("%d %s", code, body)
	}
	call := fake.Calls()[0]
	if call.Path != "/openai/v1/chat/completions" || string(call.Body) != `{"model": "`+profileID+`", "stream":true, "temperature":7.0E-1,"messages":[{"role":"user","content":"hi"}]}` {
		t.Errorf("%s %s", call.Path, call.Body)
	}
}

// TestBearer: auth bearer sends the Bedrock API key and no signature.
func TestBearer(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{APIKey: "ABSK-test-key"})
	c, err := bedrock.New(bedrock.Options{API: provider.Anthropic, BaseURL: fake.URL, Region: "us-east-1", Aliases: aliases, Auth: "bearer", APIKey: "ABSK-test-key"})
	if err != nil {
		t.Fatal(err)
	}
	if code, _, body := do(t, c, "/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`, nil); code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if h := fake.Calls()[0].Header; h.Get("Authorization") != "Bearer ABSK-test-key" || h.Get("X-Amz-Date") != "" {
		t.Errorf("headers = %v", h)
	}
}

// TestCredentialFailure: credentials the chain cannot give are a
// connection failure of the upstream (it fails over), naming no secret.
func TestCredentialFailure(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	c, _ := bedrock.New(bedrock.Options{API: provider.Anthropic, BaseURL: fake.URL, Region: "us-east-1", Auth: "sigv4",
		Credentials: failing{}})
	_, err := c.Do(t.Context(), upstream.Request{Method: "POST", Path: "/messages", Header: http.Header{}, Body: []byte(`{"model":"m","max_tokens":1,"messages":[]}`)})
	if upstream.KindOf(err) != upstream.Connect || fake.Count() != 0 {
		t.Errorf("err = %v (kind %v), %d calls", err, upstream.KindOf(err), fake.Count())
	}
}

// TestServes: Messages for api anthropic, chat completions for api
// openai, nothing else.
func TestServes(t *testing.T) {
	tests := []struct {
		api, method, path string
		want              bool
	}{
		{provider.Anthropic, "POST", "/messages", true},
		{provider.Anthropic, "POST", "/messages/count_tokens", false},
		{provider.Anthropic, "POST", "/messages/batches", false},
		{provider.Anthropic, "GET", "/models", false},
		{provider.OpenAI, "POST", "/chat/completions", true},
		{provider.OpenAI, "POST", "/responses", false},
		{provider.OpenAI, "POST", "/files", false},
	}
	for _, tt := range tests {
		c, err := bedrock.New(bedrock.Options{API: tt.api, BaseURL: "https://bedrock-runtime.us-east-1.amazonaws.com", Auth: "bearer", APIKey: "k"})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Serves(tt.method, tt.path); got != tt.want {
			t.Errorf("%s Serves(%s %s) = %v", tt.api, tt.method, tt.path, got)
		}
	}
}

type failing struct{}

func (failing) Retrieve(context.Context) (aws.Credentials, error) {
	return aws.Credentials{}, errors.New("no EC2 instance role found")
}

// gjsonID is the message id in the first line of s (a message, or a
// message_start event's data).
func gjsonID(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	if id := gjson.Get(line, "id"); id.Exists() {
		return id.String()
	}
	return gjson.Get(line, "message.id").String()
}

// countEvents is how many SSE events body holds.
func countEvents(body string) int { return strings.Count(body, "event: ") }

// countData is how many data lines body holds.
func countData(body string) int { return strings.Count(body, "data: ") }

// TestModelPath: the model id is one escaped path segment, as
// anthropic-sdk-go sends it (':' kept, an ARN's '/' as %2F), and the
// signature over it (escaped once more) is one the fake accepts.
func TestModelPath(t *testing.T) {
	tests := []struct{ give, want string }{
		{profileID, "/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke"},
		{"arn:aws:bedrock:us-east-1:123456789012:application-inference-profile/abc123",
			"/model/arn:aws:bedrock:us-east-1:123456789012:application-inference-profile%2Fabc123/invoke"},
		{"anthropic.claude (v2)", "/model/anthropic.claude%20(v2)/invoke"},
	}
	for _, tt := range tests {
		fake := bedrocktest.New(t, bedrocktest.Options{})
		c, err := bedrock.New(bedrock.Options{API: provider.Anthropic, BaseURL: fake.URL, Region: bedrocktest.DefaultRegion,
			Aliases: []provider.Alias{{Glob: "claude-x", ID: tt.give}}, Auth: "sigv4",
			Credentials: credentials.NewStaticCredentialsProvider(bedrocktest.DefaultAccessKeyID, bedrocktest.DefaultSecretAccessKey, "")})
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(t.Context(), upstream.Request{Method: "POST", Path: "/messages", Header: http.Header{}, Model: "claude-x",
			Body: []byte(`{"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`)})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if call := fake.Calls()[0]; resp.StatusCode != 200 || call.Path != tt.want || call.Model != tt.give {
			t.Errorf("%s: %d, path %s (model %q); want %s", tt.give, resp.StatusCode, call.Path, call.Model, tt.want)
		}
	}
}

// TestQuerySigned: a client's query (anthropic-sdk-go's beta Messages
// sends ?beta=true) goes on as the SDK's bedrock client sends it, inside
// the signature; any other parameter (AWS's query authentication among
// them) never reaches Bedrock.
func TestQuerySigned(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{SessionToken: "tok-1"})
	c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
	resp, err := c.Do(t.Context(), upstream.Request{Method: "POST", Path: "/messages", RawQuery: "X-Amz-Security-Token=x&beta=true&X-Amz-Expires=9", Header: http.Header{}, Model: "claude-sonnet-4-5",
		Body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if call := fake.Calls()[0]; resp.StatusCode != 200 || call.Query != "beta=true" {
		t.Errorf("%d, query %q", resp.StatusCode, call.Query)
	}
}
