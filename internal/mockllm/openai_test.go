package mockllm_test

import (
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/mockllm"
)

// newOpenAIClient returns a go-openai client talking to the mock directly,
// and the Authorization headers the mock saw.
func newOpenAIClient(t *testing.T) (*openai.Client, func() []string) {
	t.Helper()
	var mu sync.Mutex // protects auths
	var auths []string
	_, ts := startServer(t, mockllm.Options{OnRequest: func(r *http.Request) {
		mu.Lock()
		auths = append(auths, r.Header.Get("Authorization"))
		mu.Unlock()
	}})
	cfg := openai.DefaultConfig("sk-test")
	cfg.BaseURL = ts.URL + "/v1"
	cfg.HTTPClient = ts.Client()
	return openai.NewClientWithConfig(cfg), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), auths...)
	}
}

func TestOpenAIClient(t *testing.T) {
	c, auths := newOpenAIClient(t)
	ctx := testContext(t)
	req := openai.ChatCompletionRequest{
		Model:    openai.GPT4oMini,
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hello gateway"}},
	}

	resp, err := c.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatalf("CreateChatCompletion: %v", err)
	}
	const want = "mock reply to: hello gateway"
	if got := resp.Choices[0].Message.Content; got != want || resp.Usage.TotalTokens != 2+5 {
		t.Errorf("content, total tokens = %q, %d; want %q, 7", got, resp.Usage.TotalTokens, want)
	}

	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	stream, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatalf("CreateChatCompletionStream: %v", err)
	}
	defer stream.Close()
	var content string
	var usage *openai.Usage
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		if chunk.ID != resp.ID {
			t.Errorf("chunk id = %q, want %q", chunk.ID, resp.ID)
		}
		if len(chunk.Choices) > 0 {
			content += chunk.Choices[0].Delta.Content
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
	}
	if content != want || usage == nil || *usage != resp.Usage {
		t.Errorf("streamed %q, usage %+v; want %q, %+v", content, usage, want, resp.Usage)
	}

	emb, err := c.CreateEmbeddings(ctx, openai.EmbeddingRequest{
		Input:      []string{"a", "b"},
		Model:      openai.SmallEmbedding3,
		Dimensions: 16,
	})
	if err != nil {
		t.Fatalf("CreateEmbeddings: %v", err)
	}
	emb64, err := c.CreateEmbeddings(ctx, openai.EmbeddingRequest{
		Input:          []string{"a", "b"},
		Model:          openai.SmallEmbedding3,
		Dimensions:     16,
		EncodingFormat: openai.EmbeddingEncodingFormatBase64,
	})
	if err != nil {
		t.Fatalf("CreateEmbeddings base64: %v", err)
	}
	for i, input := range []string{"a", "b"} {
		want := make([]float32, 16)
		mockllm.Embed(want, input)
		if !equalFloats(emb.Data[i].Embedding, want) || !equalFloats(emb64.Data[i].Embedding, want) {
			t.Errorf("embedding %d = %v and %v (base64), want %v", i, emb.Data[i].Embedding, emb64.Data[i].Embedding, want)
		}
	}

	models, err := c.ListModels(ctx)
	if err != nil {
		t.Fatalf("ListModels: %v", err)
	}
	if len(models.Models) != len(mockllm.DefaultModels) || models.Models[0].ID != mockllm.DefaultModels[0] {
		t.Errorf("ListModels = %+v, want DefaultModels", models.Models)
	}

	for i, a := range auths() {
		if a != "Bearer sk-test" {
			t.Errorf("request %d Authorization = %q, want Bearer sk-test", i, a)
		}
	}
}

func TestOpenAIClientErrors(t *testing.T) {
	c, _ := newOpenAIClient(t)
	ctx := testContext(t)
	tests := []struct {
		give       string
		wantStatus int
		wantCode   string
	}{
		{"mock-404", 404, "model_not_found"},
		{"mock-429", 429, "rate_limit_exceeded"},
		{"mock-500", 500, "server_error"},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			_, err := c.CreateChatCompletion(ctx, openai.ChatCompletionRequest{
				Model:    tt.give,
				Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi"}},
			})
			var apiErr *openai.APIError
			if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != tt.wantStatus || apiErr.Code != tt.wantCode {
				t.Errorf("error = %#v, want an APIError with status %d and code %q", err, tt.wantStatus, tt.wantCode)
			}
		})
	}

	// A cut stream is an error, not a clean io.EOF.
	stream, err := c.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{
		Model:    "mock-cut",
		Messages: []openai.ChatCompletionMessage{{Role: openai.ChatMessageRoleUser, Content: "hi there"}},
	})
	if err != nil {
		t.Fatalf("CreateChatCompletionStream: %v", err)
	}
	defer stream.Close()
	for {
		_, err = stream.Recv()
		if err != nil {
			break
		}
	}
	if errors.Is(err, io.EOF) {
		t.Errorf("cut stream ended with io.EOF, want an error")
	}
}
