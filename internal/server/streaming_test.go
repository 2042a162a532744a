package server

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/keying"
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

// rejectStreamOptions is an upstream that refuses the stream_options field,
// as some OpenAI-compatible servers do, counting its refusals.
func rejectStreamOptions(refused *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("stream_options")) {
				refused.Add(1)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(400)
				_, _ = w.Write([]byte(`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":"stream_options","code":null}}`))
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			next.ServeHTTP(w, r)
		})
	}
}

func TestUpstreamRejectingStreamOptions(t *testing.T) {
	var refused atomic.Int32
	h := newHarness(t, func(o *harnessOptions) { o.wrapUpstream = rejectStreamOptions(&refused) })
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"old server"}]}`
	a := send(context.Background(), h.gw.URL, acmeKey, stream)
	if a.status != 200 || !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
		t.Fatalf("stream through a server without stream_options: %d %q", a.status, a.body)
	}
	// The non-streaming twin is not poisoned by a remembered 400.
	b := send(context.Background(), h.gw.URL, acmeKey, chatBody("old server"))
	if b.status != 200 {
		t.Errorf("non-streaming twin = %d %s", b.status, b.body)
	}
	// Once known, the splice is not tried again on that upstream.
	send(context.Background(), h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"second"}]}`)
	if n := refused.Load(); n != 1 {
		t.Errorf("the upstream refused stream_options %d times; want once", n)
	}
}

func TestRetryAfterABrokenStreamLeadsAnew(t *testing.T) {
	h, rs := distributed(t, 2, slowStream(6, 0))
	body := `{"model":"gpt-4o-mini","stream":true,"mock":{"cut_after":2},"messages":[{"role":"user","content":"retry me"}]}`
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	for i := range 8 {
		// Once the failed attempt has let go of its lock (its broken
		// stream stays in Redis for a while), a retry must lead anew.
		waitFor(t, func() bool { return rs.Client().Exists(context.Background(), lock).Val() == 0 })
		a := send(context.Background(), h.bases()[i%2], acmeKey, body)
		if a.header.Get("X-Corral-Cache") != cacheMiss || !strings.Contains(a.body, "upstream_error") {
			t.Fatalf("retry %d: %s %q; want a fresh MISS (never an earlier attempt's stream)", i, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := h.mock.Stats().Requests; n != 8 {
		t.Errorf("upstream calls = %d; want 8", n)
	}
}

func TestStreamingBadRequestCostsOneCall(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		if a := send(context.Background(), h.gw.URL, acmeKey, `{"model":"mock-400","stream":true,"messages":[]}`); a.status != 400 {
			t.Fatalf("status %d", a.status)
		}
	}
	if n := h.mock.Stats().Requests; n != 3 {
		t.Errorf("3 streaming requests answered 400 made %d upstream calls; want 3", n)
	}
}
