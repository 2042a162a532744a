package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/mockllm"
)

func sdk(h *harness, key string) *openai.Client {
	cfg := openai.DefaultConfig(key)
	cfg.BaseURL = h.gw.URL + "/v1"
	return openai.NewClientWithConfig(cfg)
}

func chatReq(model, text string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{
		Model:    model,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: text}},
	}
}

// streamEnd reads stream until it fails and returns what ended it: io.EOF
// for a clean end, anything else for a stream that broke.
func streamEnd(stream *openai.ChatCompletionStream) error {
	for {
		if _, err := stream.Recv(); err != nil {
			return err
		}
	}
}

// apiErr asserts err is an OpenAI API error with status and code.
func apiErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	var ae *openai.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v (%T); want *openai.APIError", err, err)
	}
	if ae.HTTPStatusCode != status || ae.Code != code {
		t.Fatalf("APIError status=%d code=%v; want %d %q (message %q)", ae.HTTPStatusCode, ae.Code, status, code, ae.Message)
	}
}

func TestSDKChat(t *testing.T) {
	h := newHarness(t)
	resp, err := sdk(h, acmeKey).CreateChatCompletion(context.Background(), chatReq("gpt-4o-mini", "Hello, Corral"))
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	if got, want := resp.Choices[0].Message.Content, "mock reply to: Hello, Corral"; got != want {
		t.Errorf("content = %q; want %q", got, want)
	}
	if resp.Usage.TotalTokens == 0 || resp.Model != "gpt-4o-mini" {
		t.Errorf("response = %+v; want usage and model echoed", resp)
	}
}

func TestSDKChatStream(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 7 })
	stream, err := sdk(h, acmeKey).CreateChatCompletionStream(context.Background(), chatReq("gpt-4o-mini", "stream me please"))
	if err != nil {
		t.Fatalf("CreateChatCompletionStream: %v", err)
	}
	defer stream.Close()
	var text strings.Builder
	var chunks int
	var finish openai.FinishReason
	for {
		r, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		chunks++
		text.WriteString(r.Choices[0].Delta.Content)
		if r.Choices[0].FinishReason != "" {
			finish = r.Choices[0].FinishReason
		}
	}
	if got, want := text.String(), "mock reply to: stream me please"; got != want {
		t.Errorf("streamed content = %q; want %q", got, want)
	}
	if chunks != 1+7+1 || finish != openai.FinishReasonStop {
		t.Errorf("chunks = %d, finish = %q; want 9 chunks ending in stop", chunks, finish)
	}
}

// TestChatKeyLeavesOutUserFields: prompt_cache_key and safety_identifier,
// like user, name who asks and which upstream prompt cache to try, not
// what the answer is; two users of one prompt share its entry.
func TestChatKeyLeavesOutUserFields(t *testing.T) {
	h := newHarness(t)
	c := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	var got []string
	for _, who := range []string{"alice", "bob"} {
		var raw *http.Response
		_, err := c.Chat.Completions.New(context.Background(), officialopenai.ChatCompletionNewParams{
			Model:            "gpt-4o-mini",
			Messages:         []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("shared prompt")},
			PromptCacheKey:   officialopenai.String("cache-" + who),
			SafetyIdentifier: officialopenai.String("sid-" + who),
			User:             officialopenai.String(who),
		}, option.WithResponseInto(&raw))
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
		got = append(got, raw.Header.Get("X-Corral-Cache"))
	}
	if got[0] != cacheMiss || got[1] != cacheHit || h.mock.Stats().Requests != 1 {
		t.Errorf("X-Corral-Cache %v with %d upstream calls; want MISS, HIT and 1", got, h.mock.Stats().Requests)
	}
}

func TestSDKCompletionsEmbeddingsModels(t *testing.T) {
	h := newHarness(t)
	c := sdk(h, acmeKey)
	ctx := context.Background()

	comp, err := c.CreateCompletion(ctx, openai.CompletionRequest{Model: "gpt-3.5-turbo-instruct", Prompt: "complete this"})
	if err != nil {
		t.Fatalf("CreateCompletion: %v", err)
	}
	if got, want := comp.Choices[0].Text, "mock reply to: complete this"; got != want {
		t.Errorf("completion text = %q; want %q", got, want)
	}

	emb, err := c.CreateEmbeddings(ctx, openai.EmbeddingRequest{Model: openai.SmallEmbedding3, Input: []string{"a", "b"}})
	if err != nil {
		t.Fatalf("CreateEmbeddings: %v", err)
	}
	want := make([]float32, 8)
	mockllm.Embed(want, "b")
	if len(emb.Data) != 2 || len(emb.Data[1].Embedding) != 8 || emb.Data[1].Embedding[3] != want[3] {
		t.Errorf("embeddings = %+v; want 2 vectors of 8 matching the mock", emb.Data)
	}

	// Without an allow-list the upstream's list comes through.
	models, err := c.ListModels(ctx)
	if err != nil {
		t.Fatalf("ListModels: %v", err)
	}
	if len(models.Models) == 0 {
		t.Error("ListModels for an unrestricted tenant is empty; want the upstream's list")
	}
	// With an allow-list, exactly that list, and no upstream call.
	before := h.mock.Stats().Requests
	models, err = sdk(h, limitedKey).ListModels(ctx)
	if err != nil {
		t.Fatalf("ListModels(limited): %v", err)
	}
	var ids []string
	for _, m := range models.Models {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "gpt-4o-mini,text-embedding-3-small" {
		t.Errorf("limited models = %v; want its allow-list", ids)
	}
	if got := h.mock.Stats().Requests; got != before {
		t.Errorf("allow-list model listing made %d upstream calls; want 0", got-before)
	}
}

func TestSDKAuthErrors(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	_, err := sdk(h, "").CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "hi"))
	apiErr(t, err, 401, "invalid_api_key")
	_, err = sdk(h, "sk-wrong").CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "hi"))
	apiErr(t, err, 401, "invalid_api_key")
	_, err = sdk(h, limitedKey).CreateChatCompletion(ctx, chatReq("gpt-4o", "hi"))
	apiErr(t, err, 403, "model_not_allowed")
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("rejected requests reached the upstream %d times; want 0", n)
	}
}

// post sends a raw request to the gateway.
func post(t *testing.T, h *harness, path, key string, body []byte, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.gw.URL+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// openAIError decodes an OpenAI-shaped error body.
func openAIError(t *testing.T, resp *http.Response) (typ, code, param string) {
	t.Helper()
	var body struct {
		Error struct {
			Message string  `json:"message"`
			Type    string  `json:"type"`
			Param   *string `json:"param"`
			Code    string  `json:"code"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("error body is not OpenAI-shaped JSON: %v", err)
	}
	if body.Error.Message == "" {
		t.Errorf("error body has no message")
	}
	if body.Error.Param != nil {
		param = *body.Error.Param
	}
	return body.Error.Type, body.Error.Code, param
}

func TestGatewayErrors(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.maxBody = 1024 })
	tests := []struct {
		name       string
		path       string
		key        string
		body       string
		wantStatus int
		wantCode   string
		wantParam  string
	}{
		{"bad json", "/v1/chat/completions", acmeKey, `{"model":`, 400, "invalid_request_error", ""},
		{"not an object", "/v1/chat/completions", acmeKey, `[1,2]`, 400, "invalid_request_error", ""},
		{"missing model", "/v1/chat/completions", acmeKey, `{"messages":[]}`, 400, "invalid_request_error", "model"},
		{"missing model embeddings", "/v1/embeddings", acmeKey, `{"input":"x"}`, 400, "invalid_request_error", "model"},
		{"too large", "/v1/chat/completions", acmeKey, `{"model":"gpt-4o-mini","x":"` + strings.Repeat("a", 2048) + `"}`, 413, "request_too_large", ""},
		{"too large proxied", "/v1/files", acmeKey, strings.Repeat("a", 2048), 413, "request_too_large", ""},
		{"no key", "/v1/chat/completions", "", `{"model":"gpt-4o-mini"}`, 401, "invalid_api_key", ""},
		{"model not allowed", "/v1/chat/completions", limitedKey, `{"model":"gpt-4o"}`, 403, "model_not_allowed", "model"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := post(t, h, tt.path, tt.key, []byte(tt.body))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q; want application/json", ct)
			}
			_, code, param := openAIError(t, resp)
			if code != tt.wantCode || param != tt.wantParam {
				t.Errorf("code, param = %q, %q; want %q, %q", code, param, tt.wantCode, tt.wantParam)
			}
		})
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("rejected requests reached the upstream %d times; want 0", n)
	}
}

func TestMethodNotAllowed(t *testing.T) {
	h := newHarness(t)
	resp := post(t, h, "/healthz", "", nil)
	if resp.StatusCode != 405 {
		t.Fatalf("POST /healthz status = %d; want 405", resp.StatusCode)
	}
	if _, code, _ := openAIError(t, resp); code != "method_not_allowed" {
		t.Errorf("code = %q; want method_not_allowed", code)
	}
}

func TestKeysNeverCross(t *testing.T) {
	h := newHarness(t)
	ctx := context.Background()
	// Bearer and Azure-style api-key both authenticate.
	if _, err := sdk(h, acmeKey).CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "one")); err != nil {
		t.Fatal(err)
	}
	resp := post(t, h, "/v1/chat/completions", "", []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"two"}]}`), "api-key", acmeKey)
	if resp.StatusCode != 200 {
		t.Fatalf("api-key auth status = %d; want 200", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	for _, hdr := range h.seenHeaders() {
		if got := hdr.Get("Authorization"); got != "Bearer "+upstreamKey {
			t.Errorf("upstream saw Authorization %q; want Corral's own key", got)
		}
		for k, vv := range hdr {
			for _, v := range vv {
				if strings.Contains(v, acmeKey) {
					t.Errorf("upstream saw the tenant key in header %s", k)
				}
			}
		}
	}
	if len(h.seenHeaders()) != 2 {
		t.Errorf("upstream saw %d requests; want 2", len(h.seenHeaders()))
	}
	// Responses, including errors, never carry the upstream key.
	for _, r := range []*http.Response{resp, post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"mock-401"}`))} {
		dump, _ := io.ReadAll(r.Body)
		dump = append(dump, body...)
		for k, vv := range r.Header {
			dump = append(dump, k...)
			dump = append(dump, strings.Join(vv, ",")...)
		}
		if bytes.Contains(dump, []byte(upstreamKey)) {
			t.Error("a response carries the upstream key")
		}
	}
}

func TestRequestID(t *testing.T) {
	h := newHarness(t)
	resp := post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"gpt-4o-mini"}`), "X-Request-Id", "client-id-42")
	if got := resp.Header.Get("X-Request-Id"); got != "client-id-42" {
		t.Errorf("X-Request-Id = %q; want the client's echoed", got)
	}
	resp = post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"gpt-4o-mini","n":1}`), "X-Request-Id", "bad id\twith junk")
	got := resp.Header.Get("X-Request-Id")
	if !strings.HasPrefix(got, "corral-") {
		t.Errorf("X-Request-Id = %q; want a generated id replacing an unsafe one", got)
	}
	seen := h.seenHeaders()
	if up := seen[len(seen)-1].Get("X-Request-Id"); up != got {
		t.Errorf("upstream saw X-Request-Id %q; want %q", up, got)
	}
}

func TestProxyPassthrough(t *testing.T) {
	h := newHarness(t)
	req, _ := http.NewRequest(http.MethodGet, h.gw.URL+"/v1/models/gpt-4o-mini", nil)
	req.Header.Set("Authorization", "Bearer "+acmeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m struct{ ID string }
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil || resp.StatusCode != 200 || m.ID != "gpt-4o-mini" {
		t.Errorf("GET /v1/models/gpt-4o-mini = %d %+v %v; want the upstream's model", resp.StatusCode, m, err)
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream requests = %d; want 1", n)
	}
}

func TestRecoverAnswers500(t *testing.T) {
	h := recoverer(nopLogger())(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != 500 || !strings.Contains(rec.Body.String(), `"code":"internal_error"`) {
		t.Errorf("panic answered %d %s; want 500 internal_error", rec.Code, rec.Body)
	}
}

func TestHealthAndReady(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get(h.gw.URL + p)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s = %d; want 200", p, resp.StatusCode)
		}
	}
}
