package azure_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/provider/azure"
	"github.com/corralhq/corral/internal/provider/azure/azuretest"
	"github.com/corralhq/corral/internal/upstream"
)

func newClient(t *testing.T, s *azuretest.Server, o azure.Options) *azure.Client {
	t.Helper()
	if o.Auth == "" {
		o.Auth, o.APIKey = azure.AuthAPIKey, s.Options().APIKey
	}
	o.Transport = s.Transport()
	c, err := azure.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func do(t *testing.T, c *azure.Client, req upstream.Request) (int, http.Header, string) {
	t.Helper()
	if req.Method == "" {
		req.Method = http.MethodPost
	}
	if req.Header == nil {
		req.Header = http.Header{"Content-Type": {"application/json"}}
	}
	resp, err := c.Do(context.Background(), req)
	if err != nil {
		t.Fatalf("Do: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

var aliases = []provider.Alias{{Glob: "gpt-4o*", ID: "gpt-4o"}}

// On the v1 API the alias replaces the model string and nothing else:
// the fake receives the client's bytes with only the model changed, at
// {url}/chat/completions, with the api-key and without the client's
// x-ms-* and API Management headers.
func TestV1ReplacesOnlyTheModel(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	c := newClient(t, s, azure.Options{BaseURL: s.V1URL(), Aliases: aliases})
	body := `{"model":"gpt-4o-mini",  "messages":[{"role":"user","content":"hi"}],"x_unknown":1.50e+00}`
	h := http.Header{"Content-Type": {"application/json"}, "X-Ms-Client-Request-Id": {"c"}, "Ocp-Apim-Subscription-Key": {"client-key"}, "X-Custom": {"kept"}}
	code, rh, got := do(t, c, upstream.Request{Path: "/chat/completions", Model: "gpt-4o-mini", Body: []byte(body), Header: h, RawQuery: "a=1"})
	if code != 200 || !strings.Contains(got, `"model":"gpt-4o-2024-08-06"`) {
		t.Fatalf("answer = %d %s", code, got)
	}
	calls := s.Calls()
	if len(calls) != 1 {
		t.Fatalf("calls = %d", len(calls))
	}
	want := `{"model":"gpt-4o",  "messages":[{"role":"user","content":"hi"}],"x_unknown":1.50e+00}`
	if cl := calls[0]; cl.Path != "/openai/v1/chat/completions" || cl.RawQuery != "a=1" || string(cl.Body) != want {
		t.Errorf("call = %s?%s %s; want body %s", cl.Path, cl.RawQuery, cl.Body, want)
	}
	hd := calls[0].Header
	if hd.Get("Api-Key") != s.Options().APIKey || hd.Get("Authorization") != "" || hd.Get("X-Ms-Client-Request-Id") != "" ||
		hd.Get("Ocp-Apim-Subscription-Key") != "" || hd.Get("X-Custom") != "kept" {
		t.Errorf("headers sent = %v", hd)
	}
	if rh.Get("Apim-Request-Id") != "" || rh.Get("X-Ms-Deployment-Name") != "" {
		t.Errorf("account headers reached the client: %v", rh)
	}
	// A model without an alias is sent as it came, byte for byte.
	raw := `{"model":"gpt-4o","input":"x"}`
	do(t, c, upstream.Request{Path: "/embeddings", Body: []byte(raw)})
	if got := string(s.CallsTo("/openai/v1/embeddings")[0].Body); got != raw {
		t.Errorf("unaliased body = %s", got)
	}
}

// The classic API carries the deployment in the path, escaped as one
// segment, and keeps the body's model; api-version comes first, the
// client's own query after it (its own api-version dropped); every other
// path is {url}/<path>?api-version=.
func TestClassicDeploymentInPath(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{Deployments: map[string]string{"gpt-4o": "gpt-4o-2024-08-06", "team a/b": "gpt-4o-mini-2024-07-18"}})
	c := newClient(t, s, azure.Options{BaseURL: s.ClassicURL(), APIVersion: "2024-10-21",
		Aliases: []provider.Alias{{Glob: "mini", ID: "team a/b"}, {Glob: "gpt-4o*", ID: "gpt-4o"}}})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"n":1.50e+00}`
	code, _, got := do(t, c, upstream.Request{Path: "/chat/completions", Model: "gpt-4o-mini", Body: []byte(body), RawQuery: "api-version=2023-05-15&x=1"})
	if code != 200 {
		t.Fatalf("answer = %d %s", code, got)
	}
	cl := s.Calls()[0]
	if cl.EscapedPath != "/openai/deployments/gpt-4o/chat/completions" || cl.RawQuery != "api-version=2024-10-21&x=1" || string(cl.Body) != body {
		t.Errorf("call = %s?%s %s", cl.EscapedPath, cl.RawQuery, cl.Body)
	}
	do(t, c, upstream.Request{Path: "/embeddings", Body: []byte(`{"model":"mini","input":"x"}`)})
	if cl := s.Calls()[1]; cl.EscapedPath != "/openai/deployments/team%20a%2Fb/embeddings" {
		t.Errorf("escaped deployment path = %s", cl.EscapedPath)
	}
	code, _, got = do(t, c, upstream.Request{Method: http.MethodGet, Path: "/files", Header: http.Header{}})
	if cl := s.Calls()[2]; code != 200 || cl.Path != "/openai/files" || cl.RawQuery != "api-version=2024-10-21" {
		t.Errorf("files = %d %s; call %s?%s", code, got, cl.Path, cl.RawQuery)
	}
	// A deployment that is a dot segment would climb out of /deployments/:
	// Corral's 400, nothing sent.
	for _, dep := range []string{"..", "."} {
		code, _, got = do(t, c, upstream.Request{Path: "/chat/completions", Model: dep, Body: []byte(`{"model":"` + dep + `","messages":[]}`)})
		if code != 400 || len(s.Calls()) != 3 {
			t.Errorf("deployment %q = %d %s, %d calls; want 400 and no call", dep, code, got, len(s.Calls()))
		}
	}
	// No model for a deployment-scoped call: Corral's 400, nothing sent.
	code, _, got = do(t, c, upstream.Request{Path: "/chat/completions", Body: []byte(`{"messages":[]}`)})
	if code != 400 || len(s.Calls()) != 3 || !strings.Contains(got, `"type":"invalid_request_error"`) {
		t.Errorf("no model = %d %s, %d calls", code, got, len(s.Calls()))
	}
}

// The fake answers as Azure does for classic calls without a supported
// api-version; Corral always sends one.
func TestFakeRefusesClassicWithoutAPIVersion(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	hc := &http.Client{Transport: s.Transport()}
	for _, tt := range []struct {
		give string
		want int
	}{{"", 404}, {"?api-version=2019-01-01", 400}} {
		req, _ := http.NewRequest("POST", s.ClassicURL()+"/deployments/gpt-4o/chat/completions"+tt.give, strings.NewReader(`{}`))
		req.Header.Set("Api-Key", s.Options().APIKey)
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tt.want {
			t.Errorf("%q = %d %s; want %d", tt.give, resp.StatusCode, b, tt.want)
		}
	}
}

// Azure's errors reach the client in OpenAI's shape with their status and
// retry headers: DeploymentNotFound 404, the content filter's 400 (its
// innererror kept), 429 with retry-after, retry-after-ms and
// x-ratelimit-*, 401 as 401 (the server makes it 502).
func TestAzureErrorsInOpenAIShape(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	c := newClient(t, s, azure.Options{BaseURL: s.V1URL()})
	chat := func(model, prompt string) (int, http.Header, string) {
		return do(t, c, upstream.Request{Path: "/chat/completions", Body: []byte(`{"model":"` + model + `","messages":[{"role":"user","content":"` + prompt + `"}]}`)})
	}
	code, _, got := chat("nope", "hi")
	if want := `{"error":{"message":"The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.","type":"invalid_request_error","param":null,"code":"DeploymentNotFound"}}`; code != 404 || got != want {
		t.Errorf("unknown deployment = %d %s", code, got)
	}
	code, _, got = chat("gpt-4o", "FilterMe")
	var e struct {
		Error struct {
			Type, Code string
			Param      *string
			InnerError struct {
				Code string `json:"code"`
			} `json:"innererror"`
		}
	}
	if err := json.Unmarshal([]byte(got), &e); err != nil || code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Code != "content_filter" ||
		e.Error.Param == nil || *e.Error.Param != "prompt" || e.Error.InnerError.Code != "ResponsibleAIPolicyViolation" {
		t.Errorf("content filter = %d %s", code, got)
	}
	code, h, got := chat("gpt-4o", "ThrottleMe")
	if code != 429 || h.Get("Retry-After") != "7" || h.Get("Retry-After-Ms") != "7000" || h.Get("X-Ratelimit-Remaining-Requests") != "0" ||
		!strings.HasPrefix(got, `{"error":{"message":"Requests to the ChatCompletions_Create Operation`) || !strings.HasSuffix(got, `"type":"rate_limit_error","param":null,"code":"429"}}`) {
		t.Errorf("throttled = %d %v %s", code, h, got)
	}
	bad := newClient(t, s, azure.Options{BaseURL: s.V1URL(), Auth: azure.AuthAPIKey, APIKey: "bad-key-4711"})
	code, _, got = do(t, bad, upstream.Request{Path: "/chat/completions", Body: []byte(`{"model":"gpt-4o","messages":[]}`)})
	if code != 401 || !strings.Contains(got, `"type":"authentication_error"`) || strings.Contains(got, "bad-key-4711") {
		t.Errorf("wrong key = %d %s", code, got)
	}
}

// On the v1 API a multipart form's model field is replaced by its alias,
// every other byte (the file, the boundaries) the client's.
func TestV1MultipartModel(t *testing.T) {
	s := azuretest.New(t, azuretest.Options{})
	c := newClient(t, s, azure.Options{BaseURL: s.V1URL(), Aliases: []provider.Alias{{Glob: "whisper", ID: "whisper-prod"}}})
	form := "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: audio/wav\r\n\r\nRIFF\x00\x01\r\n--XyZ\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper\r\n--XyZ--\r\n"
	h := http.Header{"Content-Type": {"multipart/form-data; boundary=XyZ"}}
	do(t, c, upstream.Request{Path: "/audio/transcriptions", Body: []byte(form), Header: h})
	want := strings.Replace(form, "\r\n\r\nwhisper\r\n", "\r\n\r\nwhisper-prod\r\n", 1)
	if got := string(s.Calls()[0].Body); got != want {
		t.Errorf("form sent = %q; want %q", got, want)
	}
	// Classic: the multipart model names the deployment in the path.
	cc := newClient(t, s, azure.Options{BaseURL: s.ClassicURL(), APIVersion: "2024-10-21", Aliases: []provider.Alias{{Glob: "whisper", ID: "whisper-prod"}}})
	do(t, cc, upstream.Request{Path: "/audio/transcriptions", Body: []byte(form), Header: h})
	if cl := s.Calls()[1]; cl.Path != "/openai/deployments/whisper-prod/audio/transcriptions" || !bytes.Equal(cl.Body, []byte(form)) {
		t.Errorf("classic form call = %s %q", cl.Path, cl.Body)
	}
}
