package vertex

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/provider/vertex/vertextest"
	"github.com/corralhq/corral/internal/upstream"
)

// isolate points Google's credential chain at file alone: no gcloud
// configuration, no metadata server probe.
func isolate(t *testing.T, file string) {
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", file)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1")
}

// newClients are Clients for each api in front of s, sharing the
// process's default credentials as the gateway's upstreams do.
func newClients(t *testing.T, s *vertextest.Server, apis ...string) []*Client {
	t.Helper()
	ts, err := DefaultTokenSource(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var out []*Client
	for _, api := range apis {
		out = append(out, newClient(t, s, api, ts))
	}
	return out
}

func newClient(t *testing.T, s *vertextest.Server, api string, ts oauth2.TokenSource) *Client {
	t.Helper()
	c, err := New(Options{API: api, BaseURL: s.URL, Project: "test-project", Region: "us-east5", Tokens: ts, Aliases: []provider.Alias{
		{Glob: "claude-sonnet-4-5*", ID: "claude-sonnet-4-5@20250929"},
		{Glob: "odd", ID: "a/b;c"},
		{Glob: "gemini-flash", ID: "google/gemini-2.0-flash-001"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type answer struct {
	status int
	header http.Header
	body   string
}

func do(t *testing.T, c *Client, path string, h http.Header, body string) answer {
	t.Helper()
	resp, err := c.Do(context.Background(), upstream.Request{Method: http.MethodPost, Path: path, Header: h, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, string(b)}
}

const location = "/v1/projects/test-project/locations/us-east5"

// TestEnvelope: what reaches Vertex for each kind of call, byte for byte:
// the URL, the body's model, stream and anthropic_version, the headers.
func TestEnvelope(t *testing.T) {
	s := vertextest.New(t, vertextest.Options{})
	isolate(t, s.CredentialsFile)
	cs := newClients(t, s, provider.Anthropic, provider.OpenAI)
	claude, openai := cs[0], cs[1]
	odd := `"x":1.50e+00,"messages":[{"role":"user","content":[{"type":"text","text":"hi","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]`
	tests := []struct {
		name     string
		client   *Client
		path     string
		header   http.Header
		give     string
		wantPath string
		wantBody string
	}{
		{"messages: the model leaves, the header's version joins", claude, "/messages",
			http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"context-1m-2025-08-07"}, "X-Goog-User-Project": {"theirs"}},
			`{"model":"claude-sonnet-4-5","max_tokens":8,` + odd + `}`,
			location + "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			`{"max_tokens":8,` + odd + `,"anthropic_version":"2023-06-01"}`},
		{"messages: no version sent takes Vertex's", claude, "/messages", nil,
			`{"model":"claude-sonnet-4-5","max_tokens":8,` + odd + `}`,
			location + "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			`{"max_tokens":8,` + odd + `,"anthropic_version":"vertex-2023-10-16"}`},
		{"messages: the body's version wins", claude, "/messages", http.Header{"Anthropic-Version": {"2023-06-01"}},
			`{"anthropic_version":"vertex-2023-10-16","max_tokens":8,"model":"claude-sonnet-4-5",` + odd + `}`,
			location + "/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict",
			`{"anthropic_version":"vertex-2023-10-16","max_tokens":8,` + odd + `}`},
		{"stream: streamRawPredict, stream kept", claude, "/messages", nil,
			`{"model":"claude-sonnet-4-5","stream":true,"max_tokens":8,` + odd + `}`,
			location + "/publishers/anthropic/models/claude-sonnet-4-5@20250929:streamRawPredict",
			`{"stream":true,"max_tokens":8,` + odd + `,"anthropic_version":"vertex-2023-10-16"}`},
		{"an id with / and ; is one escaped segment", claude, "/messages", nil,
			`{"model":"odd","max_tokens":8,` + odd + `}`,
			location + "/publishers/anthropic/models/a%2Fb%3Bc:rawPredict",
			`{"max_tokens":8,` + odd + `,"anthropic_version":"vertex-2023-10-16"}`},
		{"count_tokens: the model stays, as its alias", claude, "/messages/count_tokens", nil,
			`{"model":"claude-sonnet-4-5",` + odd + `}`,
			location + "/publishers/anthropic/models/count-tokens:rawPredict",
			`{"model":"claude-sonnet-4-5@20250929",` + odd + `,"anthropic_version":"vertex-2023-10-16"}`},
		{"chat completions: the model becomes its alias", openai, "/chat/completions", http.Header{"X-Goog-Api-Key": {"theirs"}},
			`{"model":"gemini-flash",` + odd + `}`,
			location + "/endpoints/openapi/chat/completions",
			`{"model":"google/gemini-2.0-flash-001",` + odd + `}`},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := do(t, tt.client, tt.path, tt.header, tt.give)
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.body)
			}
			got := s.Requests()[i]
			if got.Path != tt.wantPath {
				t.Errorf("path %s; want %s", got.Path, tt.wantPath)
			}
			if string(got.Body) != tt.wantBody {
				t.Errorf("body\n got %s\nwant %s", got.Body, tt.wantBody)
			}
			for _, k := range []string{"Anthropic-Version", "X-Goog-User-Project", "X-Goog-Api-Key"} {
				if v := got.Header.Values(k); v != nil {
					t.Errorf("%s reached Vertex: %q", k, v)
				}
			}
			if v := tt.header.Get("Anthropic-Beta"); got.Header.Get("Anthropic-Beta") != v {
				t.Errorf("anthropic-beta at Vertex %q; want the client's %q", got.Header.Get("Anthropic-Beta"), v)
			}
			if strings.Contains(tt.give, `"stream":true`) && a.header.Get("Content-Type") != "text/event-stream; charset=utf-8" {
				t.Errorf("stream answered as %q", a.header.Get("Content-Type"))
			}
		})
	}
	if g := s.Grants(); g != 1 {
		t.Errorf("grants = %d; want one token for every call", g)
	}
}

// TestServes: only the endpoints Vertex has; any other is Corral's 404.
func TestServes(t *testing.T) {
	s := vertextest.New(t, vertextest.Options{})
	isolate(t, s.CredentialsFile)
	cs := newClients(t, s, provider.Anthropic, provider.OpenAI)
	claude, openai := cs[0], cs[1]
	tests := []struct {
		c      *Client
		method string
		path   string
		want   bool
	}{
		{claude, "POST", "/messages", true},
		{claude, "POST", "/messages/count_tokens", true},
		{claude, "POST", "/messages/batches", false},
		{claude, "GET", "/models", false},
		{claude, "POST", "/files", false},
		{openai, "POST", "/chat/completions", true},
		{openai, "POST", "/responses", false},
		{openai, "POST", "/files", false},
		{openai, "GET", "/chat/completions", false},
	}
	for _, tt := range tests {
		if got := tt.c.Serves(tt.method, tt.path); got != tt.want {
			t.Errorf("%s Serves(%s %s) = %v", tt.c.o.API, tt.method, tt.path, got)
		}
	}
	if a := do(t, claude, "/messages/batches", nil, `{}`); a.status != 404 || !strings.Contains(a.body, `"not_found_error"`) || s.Calls() != 0 {
		t.Errorf("an endpoint Vertex lacks: %d %s after %d calls", a.status, a.body, s.Calls())
	}
	if a := do(t, claude, "/messages", nil, `[1]`); a.status != 400 || !strings.Contains(a.body, `"invalid_request_error"`) || s.Calls() != 0 {
		t.Errorf("a body that is no JSON object: %d %s after %d calls", a.status, a.body, s.Calls())
	}
}

// TestErrors: Google's error bodies reach the client in its API's shape
// with the status and Retry-After; Claude's own pass untouched.
func TestErrors(t *testing.T) {
	var reply *vertextest.Reply
	s := vertextest.New(t, vertextest.Options{Reply: func(vertextest.Request) *vertextest.Reply { return reply }})
	isolate(t, s.CredentialsFile)
	cs := newClients(t, s, provider.Anthropic, provider.OpenAI)
	claude, openai := cs[0], cs[1]
	quota := &vertextest.Reply{Status: 429, Header: http.Header{"Retry-After": {"7"}, "Content-Type": {"application/json; charset=UTF-8"}},
		Body: `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.","status":"RESOURCE_EXHAUSTED"}}`}
	own := `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_vrtx_1"}`
	tests := []struct {
		name  string
		c     *Client
		path  string
		reply *vertextest.Reply
		want  answer
	}{
		{"Google's 429 as Anthropic's", claude, "/messages", quota, answer{429, http.Header{"Retry-After": {"7"}},
			`{"type":"error","error":{"type":"rate_limit_error","message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model."}}`}},
		{"Google's 429 as OpenAI's", openai, "/chat/completions", quota, answer{429, http.Header{"Retry-After": {"7"}},
			`{"error":{"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.","type":"rate_limit_error","param":null,"code":"RESOURCE_EXHAUSTED"}}`}},
		{"Google's error as a list", openai, "/chat/completions",
			&vertextest.Reply{Status: 400, Body: `[{"error":{"code":400,"message":"Request contains an invalid argument.","status":"INVALID_ARGUMENT"}}]`},
			answer{400, nil, `{"error":{"message":"Request contains an invalid argument.","type":"invalid_request_error","param":null,"code":"INVALID_ARGUMENT"}}`}},
		{"Claude's own error passes", claude, "/messages", &vertextest.Reply{Status: 529, Body: own}, answer{529, nil, own}},
	}
	for _, tt := range tests {
		reply = tt.reply
		a := do(t, tt.c, tt.path, nil, `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)
		if a.status != tt.want.status || a.body != tt.want.body {
			t.Errorf("%s: %d %s; want %d %s", tt.name, a.status, a.body, tt.want.status, tt.want.body)
		}
		for k := range tt.want.header {
			if a.header.Get(k) != tt.want.header.Get(k) {
				t.Errorf("%s: %s = %q; want %q", tt.name, k, a.header.Get(k), tt.want.header.Get(k))
			}
		}
	}
}

// TestCredentialsLater: with no credentials at start the token source is
// still made; a call fails as a connection failure (it fails over) naming
// no secret, and once the key file appears calls succeed.
func TestCredentialsLater(t *testing.T) {
	s := vertextest.New(t, vertextest.Options{})
	file := filepath.Join(t.TempDir(), "later.json")
	isolate(t, file)
	c := newClients(t, s, provider.Anthropic)[0]
	_, err := c.Do(context.Background(), upstream.Request{Method: "POST", Path: "/messages", Body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`)})
	if upstream.KindOf(err) != upstream.Connect || s.Calls() != 0 {
		t.Fatalf("no credentials: err %v (kind %v), %d calls; want a Connect failure and no call", err, upstream.KindOf(err), s.Calls())
	}
	key, _ := os.ReadFile(s.CredentialsFile)
	if err := os.WriteFile(file, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if a := do(t, c, "/messages", nil, `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`); a.status != 200 {
		t.Fatalf("credentials in place: %d %s", a.status, a.body)
	}
}

// Only the query anthropic-sdk-go sends (?beta=true) reaches Vertex:
// Google's own query controls (another project's quota or billing, an API
// key, the answer's framing) are the client's to set for nobody. A model
// id with a ':' would name another method and is refused unsent.
func TestQueryAndMethodFromTheClientNeverReachVertex(t *testing.T) {
	s := vertextest.New(t, vertextest.Options{})
	isolate(t, s.CredentialsFile)
	claude := newClients(t, s, provider.Anthropic)[0]
	body := `{"model":"claude-sonnet-4-5","max_tokens":8,"messages":[{"role":"user","content":"hi"}]}`
	resp, err := claude.Do(context.Background(), upstream.Request{Method: http.MethodPost, Path: "/messages",
		RawQuery: "userProject=theirs&beta=true&key=k&alt=sse&quotaUser=q", Header: http.Header{}, Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := s.Requests()[0].Query; resp.StatusCode != 200 || got != "beta=true" {
		t.Errorf("%d, query at Vertex %q; want beta=true only", resp.StatusCode, got)
	}
	a := do(t, claude, "/messages", nil, `{"model":"x:streamRawPredict","max_tokens":8,"messages":[]}`)
	if a.status != 400 || len(s.Requests()) != 1 {
		t.Errorf("model with ':' = %d %s, %d calls; want 400 and no call", a.status, a.body, len(s.Requests()))
	}
}
