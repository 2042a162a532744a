package server

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestStreamingMissHitAndCrossover(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	c := sdk(h, acmeKey)
	ctx := context.Background()
	read := func(req openai.ChatCompletionRequest) (string, string, *openai.Usage) {
		t.Helper()
		req.Stream = true
		st, err := c.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var b strings.Builder
		var usage *openai.Usage
		for {
			r, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if len(r.Choices) > 0 {
				b.WriteString(r.Choices[0].Delta.Content)
			}
			if r.Usage != nil {
				usage = r.Usage
			}
		}
		return b.String(), st.Header().Get("X-Corral-Cache"), usage
	}
	want := "mock reply to: streamed prompt"
	text, status, usage := read(chatReq("gpt-4o-mini", "streamed prompt"))
	if text != want || status != cacheMiss || usage != nil {
		t.Errorf("streaming miss: %q %s usage=%v; want %q MISS and no usage chunk (not asked for)", text, status, usage, want)
	}
	req := chatReq("gpt-4o-mini", "streamed prompt")
	req.StreamOptions = &openai.StreamOptions{IncludeUsage: true}
	text, status, usage = read(req)
	if text != want || status != cacheHit || usage == nil || usage.TotalTokens == 0 {
		t.Errorf("streaming hit: %q %s usage=%v; want %q HIT with a usage chunk", text, status, usage, want)
	}
	// A non-streaming request is served from the entry the stream stored.
	resp, err := c.CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "streamed prompt"))
	if err != nil || resp.Choices[0].Message.Content != want || resp.Usage.TotalTokens == 0 {
		t.Errorf("non-streaming from a streamed entry: %+v %v", resp, err)
	}
	// And the other way round.
	if _, err := c.CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "plain first")); err != nil {
		t.Fatal(err)
	}
	text, status, _ = read(chatReq("gpt-4o-mini", "plain first"))
	if text != "mock reply to: plain first" || status != cacheHit {
		t.Errorf("streaming from a plain entry: %q %s", text, status)
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
}

func TestConcurrentStreamsOneCall(t *testing.T) {
	gate := make(chan struct{})
	h := newHarness(t, func(o *harnessOptions) { o.gate = gate; o.mock.StreamChunks = 4 })
	go func() {
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		close(gate)
	}()
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"together"}]}`
	answers := burst([]string{h.gw.URL}, 30, acmeKey, body)
	for i, a := range answers {
		if a.status != 200 || !strings.HasSuffix(a.body, "data: [DONE]\n\n") || strings.Contains(a.body, `"usage":{`) {
			t.Fatalf("stream %d: %d %q", i, a.status, a.body)
		}
		if got := sseText(t, a.body); got != "mock reply to: together" {
			t.Errorf("stream %d text = %q", i, got)
		}
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
}

// sseText concatenates the content deltas of a chat SSE body.
func sseText(t *testing.T, body string) string {
	t.Helper()
	var b strings.Builder
	for ev := range strings.SplitSeq(strings.TrimSpace(body), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			continue
		}
		var chunk openai.ChatCompletionStreamResponse
		if err := jsonUnmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		for _, c := range chunk.Choices {
			b.WriteString(c.Delta.Content)
		}
	}
	return b.String()
}

func TestStreamCutIsNotStored(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	body := `{"model":"gpt-4o-mini","stream":true,"mock":{"cut_after":3},"messages":[{"role":"user","content":"cut"}]}`
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if !strings.Contains(a.body, `"code":"upstream_error"`) || strings.Contains(a.body, "[DONE]") {
		t.Fatalf("cut stream body = %q; want an error event and no [DONE]", a.body)
	}
	b := send(context.Background(), h.gw.URL, acmeKey, body)
	if b.header.Get("X-Corral-Cache") != cacheMiss || h.mock.Stats().Requests != 2 {
		t.Errorf("after a cut: %s with %d upstream calls; want MISS and 2", b.header.Get("X-Corral-Cache"), h.mock.Stats().Requests)
	}
}
