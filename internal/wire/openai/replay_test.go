package openai_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/sse"
)

// Non-streaming bodies as OpenAI returns them (pretty-printed), in the
// shape Assembler produces, so a round trip must give them back exactly.
const (
	bodyChatText = `{
  "id": "chatcmpl-123",
  "object": "chat.completion",
  "created": 1677652288,
  "model": "gpt-4o-mini",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": "\n\nHello there, how may I assist you today? \u00e9\u4e16\ud83d\ude00 \"quoted\" <tag>",
        "refusal": null
      },
      "logprobs": null,
      "finish_reason": "stop"
    }
  ],
  "usage": {
    "prompt_tokens": 9,
    "completion_tokens": 12,
    "total_tokens": 21,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0}
  },
  "service_tier": "default",
  "system_fingerprint": "fp_44709d6fcb"
}`
	bodyChatTools = `{
  "id": "chatcmpl-abc123",
  "object": "chat.completion",
  "created": 1699896916,
  "model": "gpt-4o-mini",
  "choices": [
    {
      "index": 0,
      "message": {
        "role": "assistant",
        "content": null,
        "refusal": null,
        "tool_calls": [
          {"id": "call_abc123", "type": "function", "function": {"name": "get_current_weather", "arguments": "{\n\"location\": \"Boston, MA\"\n}"}},
          {"id": "call_def456", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
        ]
      },
      "logprobs": null,
      "finish_reason": "tool_calls"
    }
  ],
  "usage": {"prompt_tokens": 82, "completion_tokens": 17, "total_tokens": 99},
  "system_fingerprint": null
}`
	bodyChatN2 = `{"id":"chatcmpl-n2","object":"chat.completion","created":1700000000,"model":"gpt-4o",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":"Red rose","refusal":null},"logprobs":{"content":[{"token":"Red","logprob":-0.1,"bytes":[82,101,100],"top_logprobs":[]},{"token":" rose","logprob":-0.2,"bytes":null,"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"},` +
		`{"index":1,"message":{"role":"assistant","content":null,"refusal":"I can't."},"logprobs":null,"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9},"system_fingerprint":"fp_1"}`
	bodyChatFunctionCall = `{"id":"chatcmpl-fc","object":"chat.completion","created":1700000001,"model":"gpt-3.5-turbo-0613",` +
		`"choices":[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"function_call":{"name":"get_weather","arguments":"{\"loc\":\"NYC\"}"}},"logprobs":null,"finish_reason":"function_call"}],` +
		`"usage":{"prompt_tokens":50,"completion_tokens":10,"total_tokens":60},"system_fingerprint":null}`
	bodyCompletion = `{
  "id": "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7",
  "object": "text_completion",
  "created": 1589478378,
  "model": "gpt-3.5-turbo-instruct",
  "choices": [
    {"text": "\n\nThis is indeed a test", "index": 0, "logprobs": null, "finish_reason": "length"},
    {"text": "", "index": 1, "logprobs": null, "finish_reason": "stop"}
  ],
  "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
  "system_fingerprint": "fp_44709d6fcb"
}`
	bodyCompletionLogprobs = `{"id":"cmpl-lp","object":"text_completion","created":1589478378,"model":"gpt-3.5-turbo-instruct",` +
		`"choices":[{"text":"Hi!","index":0,"logprobs":{"tokens":["Hi","!"],"token_logprobs":[-0.1,-0.2],"top_logprobs":[{"Hi":-0.1},{"!":-0.2}],"text_offset":[7,9]},"finish_reason":"stop"}],` +
		`"usage":{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}`
)

// longBody is a chat body whose content needs several replayed deltas:
// 40 KiB of multi-byte text with escapes.
func longBody(tb testing.TB) []byte {
	tb.Helper()
	content := strings.Repeat("héllo wörld \"x\"\n世界 ", 1600)
	body, err := json.Marshal(map[string]any{
		"id": "chatcmpl-long", "object": "chat.completion", "created": 1, "model": "gpt-4o",
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": content, "refusal": nil},
			"logprobs": nil, "finish_reason": "length",
		}},
		"usage":              map[string]any{"prompt_tokens": 1, "completion_tokens": 4000, "total_tokens": 4001},
		"system_fingerprint": nil,
	})
	if err != nil {
		tb.Fatal(err)
	}
	return body
}

// reassemble reads the replayed events as the server would read an
// upstream stream: through EventReader and Data into an Assembler.
func reassemble(tb testing.TB, endpoint string, events [][]byte) *openai.Assembler {
	tb.Helper()
	er := sse.NewEventReader(bytes.NewReader(bytes.Join(events, nil)))
	a := openai.NewAssembler(endpoint)
	for {
		ev, err := er.Next()
		if err == io.EOF {
			return a
		}
		if err != nil {
			tb.Fatalf("EventReader: %v", err)
		}
		if err := a.Add(sse.Data(ev)); err != nil {
			tb.Fatalf("Add(%q): %v", ev, err)
		}
	}
}

func replay(tb testing.TB, endpoint string, body []byte, includeUsage bool) [][]byte {
	tb.Helper()
	events, err := openai.Replay(endpoint, body, includeUsage)
	if err != nil {
		tb.Fatalf("Replay: %v", err)
	}
	return events
}

func unmarshalAny(tb testing.TB, b []byte) any {
	tb.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		tb.Fatalf("unmarshal %s: %v", b, err)
	}
	return v
}

// TestReplayRoundTrip: a stored body, replayed and reassembled, is the same
// JSON again.
func TestReplayRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		give     []byte
	}{
		{name: "chat text", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatText)},
		{name: "chat tool calls", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatTools)},
		{name: "chat n=2 logprobs refusal", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatN2)},
		{name: "chat function_call", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatFunctionCall)},
		{name: "chat long content", endpoint: openai.ChatCompletionsPath, give: longBody(t)},
		{name: "completions", endpoint: openai.CompletionsPath, give: []byte(bodyCompletion)},
		{name: "completions logprobs", endpoint: openai.CompletionsPath, give: []byte(bodyCompletionLogprobs)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := reassemble(t, tt.endpoint, replay(t, tt.endpoint, tt.give, true))
			if !a.Complete() {
				t.Fatal("reassembled stream not Complete")
			}
			got, err := a.Body()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(unmarshalAny(t, tt.give), unmarshalAny(t, got)); diff != "" {
				t.Errorf("round trip (-stored +reassembled):\n%s", diff)
			}
		})
	}
}

// TestAssembleRoundTrip: an assembled stream, replayed and assembled again,
// gives the identical bytes.
func TestAssembleRoundTrip(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		give     []string
	}{
		{name: "text", endpoint: openai.ChatCompletionsPath, give: streamText},
		{name: "tools", endpoint: openai.ChatCompletionsPath, give: streamTools},
		{name: "n=2", endpoint: openai.ChatCompletionsPath, give: streamN2},
		{name: "refusal", endpoint: openai.ChatCompletionsPath, give: streamRefusal},
		{name: "function_call", endpoint: openai.ChatCompletionsPath, give: streamFunctionCall},
		{name: "logprobs", endpoint: openai.ChatCompletionsPath, give: streamLogprobs},
		{name: "completions", endpoint: openai.CompletionsPath, give: streamCompletion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := assembledBody(t, tt.endpoint, tt.give)
			got, err := reassemble(t, tt.endpoint, replay(t, tt.endpoint, want, true)).Body()
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("reassembled\n%s\nwant\n%s", got, want)
			}
		})
	}
}

// TestReplayEventShape checks the framing every SSE client relies on.
func TestReplayEventShape(t *testing.T) {
	tests := []struct {
		name         string
		endpoint     string
		give         []byte
		includeUsage bool
		wantUsage    int // chunks with "usage":null
	}{
		{name: "chat with usage", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatText), includeUsage: true, wantUsage: 3},
		{name: "chat without usage", endpoint: openai.ChatCompletionsPath, give: []byte(bodyChatText)},
		{name: "completions with usage", endpoint: openai.CompletionsPath, give: []byte(bodyCompletion), includeUsage: true, wantUsage: 2},
		{name: "long", endpoint: openai.ChatCompletionsPath, give: longBody(t), includeUsage: true, wantUsage: 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			events := replay(t, tt.endpoint, tt.give, tt.includeUsage)
			if got := string(events[len(events)-1]); got != "data: [DONE]\n\n" {
				t.Errorf("last event = %q, want [DONE]", got)
			}
			nulls := 0
			for i, ev := range events {
				line, ok := bytes.CutSuffix(ev, []byte("\n\n"))
				if !bytes.HasPrefix(ev, []byte("data: ")) || !ok || bytes.ContainsAny(line, "\r\n") {
					t.Fatalf("event %d is not one data line: %q", i, ev)
				}
				if len(line) > 64<<10 {
					t.Errorf("event %d is %d bytes, over bufio.Scanner's default", i, len(line))
				}
				nulls += bytes.Count(ev, []byte(`"usage":null`))
			}
			if nulls != tt.wantUsage {
				t.Errorf(`%d chunks with "usage":null, want %d`, nulls, tt.wantUsage)
			}
			if got := bytes.Count(bytes.Join(events, nil), []byte(`"usage":{`)); got != boolInt(tt.includeUsage) {
				t.Errorf("%d usage chunks, want %d", got, boolInt(tt.includeUsage))
			}
		})
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// TestReplayChatChunks pins the chunk sequence for one choice.
func TestReplayChatChunks(t *testing.T) {
	body := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2},"service_tier":"default","system_fingerprint":"fp_1"}`
	const p = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","service_tier":"default","system_fingerprint":"fp_1","choices":[`
	want := []string{
		p + `{"index":0,"delta":{"role":"assistant","content":"","refusal":null},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n",
		p + `{"index":0,"delta":{"content":"Hi"},"logprobs":null,"finish_reason":null}],"usage":null}` + "\n\n",
		p + `{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}],"usage":null}` + "\n\n",
		p + `],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}` + "\n\n",
		"data: [DONE]\n\n",
	}
	events := replay(t, openai.ChatCompletionsPath, []byte(body), true)
	got := make([]string, len(events))
	for i, ev := range events {
		got[i] = string(ev)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestReplayErrors(t *testing.T) {
	tests := []struct {
		name     string
		endpoint string
		give     string
		wantIs   error
	}{
		{name: "embeddings", endpoint: "/embeddings", give: bodyChatText, wantIs: openai.ErrUnsupportedEndpoint},
		{name: "invalid JSON", endpoint: openai.ChatCompletionsPath, give: `{"id":`},
		{name: "no choices", endpoint: openai.ChatCompletionsPath, give: `{"id":"x","choices":[]}`},
		{name: "chat choice without message", endpoint: openai.ChatCompletionsPath, give: bodyCompletion},
		{name: "array content", endpoint: openai.ChatCompletionsPath, give: `{"choices":[{"message":{"content":[{"type":"text"}]}}]}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.Replay(tt.endpoint, []byte(tt.give), true)
			if err == nil || (tt.wantIs != nil && !errors.Is(err, tt.wantIs)) {
				t.Errorf("Replay error = %v, want an error (is %v)", err, tt.wantIs)
			}
		})
	}
}

// sdkClient serves events as a streaming response to a real go-openai
// client, as a cache hit would.
func sdkClient(tb testing.TB, events [][]byte) *goopenai.Client {
	tb.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
		rc := http.NewResponseController(w)
		for _, ev := range events {
			if _, err := w.Write(ev); err != nil {
				return
			}
			_ = rc.Flush()
		}
	}))
	tb.Cleanup(srv.Close)
	cfg := goopenai.DefaultConfig("sk-test")
	cfg.BaseURL = srv.URL + "/v1"
	cfg.HTTPClient = srv.Client()
	return goopenai.NewClientWithConfig(cfg)
}

// collectChat rebuilds a ChatCompletionResponse from what the SDK's stream
// reader hands the application, the way an application would.
func collectChat(tb testing.TB, s *goopenai.ChatCompletionStream) goopenai.ChatCompletionResponse {
	tb.Helper()
	var (
		out     goopenai.ChatCompletionResponse
		choices = map[int]*goopenai.ChatCompletionChoice{}
		usages  int
	)
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatalf("Recv: %v", err)
		}
		if resp.Object != "chat.completion.chunk" {
			tb.Errorf("object = %q", resp.Object)
		}
		out.ID, out.Created, out.Model, out.SystemFingerprint = resp.ID, resp.Created, resp.Model, resp.SystemFingerprint
		if resp.Usage != nil {
			usages++
			out.Usage = *resp.Usage
			if len(resp.Choices) != 0 {
				tb.Errorf("usage chunk has %d choices, want 0", len(resp.Choices))
			}
		}
		for _, c := range resp.Choices {
			ch := choices[c.Index]
			if ch == nil {
				ch = &goopenai.ChatCompletionChoice{Index: c.Index}
				choices[c.Index] = ch
			}
			m := &ch.Message
			if c.Delta.Role != "" {
				m.Role = c.Delta.Role
			}
			m.Content += c.Delta.Content
			m.Refusal += c.Delta.Refusal
			for _, tc := range c.Delta.ToolCalls {
				if *tc.Index == len(m.ToolCalls) {
					m.ToolCalls = append(m.ToolCalls, goopenai.ToolCall{ID: tc.ID, Type: tc.Type})
				}
				m.ToolCalls[*tc.Index].Function.Name += tc.Function.Name
				m.ToolCalls[*tc.Index].Function.Arguments += tc.Function.Arguments
			}
			if fc := c.Delta.FunctionCall; fc != nil {
				if m.FunctionCall == nil {
					m.FunctionCall = &goopenai.FunctionCall{}
				}
				m.FunctionCall.Name += fc.Name
				m.FunctionCall.Arguments += fc.Arguments
			}
			if c.FinishReason != "" {
				ch.FinishReason = c.FinishReason
			}
		}
	}
	if usages > 1 {
		tb.Errorf("%d usage chunks, want at most 1", usages)
	}
	out.Object = "chat.completion"
	for _, k := range slices.Sorted(maps.Keys(choices)) {
		out.Choices = append(out.Choices, *choices[k])
	}
	return out
}

func TestReplayChatSDK(t *testing.T) {
	tests := []struct {
		name string
		give []byte
	}{
		{name: "text", give: []byte(bodyChatText)},
		{name: "tool calls", give: []byte(bodyChatTools)},
		{name: "n=2 with refusal", give: []byte(bodyChatN2)},
		{name: "function_call", give: []byte(bodyChatFunctionCall)},
		{name: "long content", give: longBody(t)},
		{name: "assembled tool stream", give: assembledBody(t, openai.ChatCompletionsPath, streamTools)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := sdkClient(t, replay(t, openai.ChatCompletionsPath, tt.give, true))
			s, err := c.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
				Model:         "gpt-4o-mini",
				Messages:      []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Hello"}},
				StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			got := collectChat(t, s)

			var want goopenai.ChatCompletionResponse
			if err := json.Unmarshal(tt.give, &want); err != nil {
				t.Fatal(err)
			}
			opts := cmp.Options{
				ignoreHeader,
				cmpopts.IgnoreFields(goopenai.ChatCompletionResponse{}, "ServiceTier"), // not in go-openai's chunk type
				cmpopts.IgnoreFields(goopenai.ChatCompletionChoice{}, "LogProbs"),      // checked by the round trip
			}
			if diff := cmp.Diff(want, got, opts); diff != "" {
				t.Errorf("SDK view (-stored +streamed):\n%s", diff)
			}
		})
	}
}

func TestReplayCompletionSDK(t *testing.T) {
	c := sdkClient(t, replay(t, openai.CompletionsPath, []byte(bodyCompletion), true))
	s, err := c.CreateCompletionStream(context.Background(), goopenai.CompletionRequest{
		Model:         "gpt-3.5-turbo-instruct",
		Prompt:        "Say this is a test",
		N:             2,
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var (
		texts   = map[int]string{}
		finish  = map[int]string{}
		usage   *goopenai.Usage
		id      string
		objects = map[string]bool{}
	)
	for {
		resp, err := s.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("Recv: %v", err)
		}
		id = resp.ID
		objects[resp.Object] = true
		if resp.Usage != nil {
			usage = resp.Usage
		}
		for _, ch := range resp.Choices {
			texts[ch.Index] += ch.Text
			if ch.FinishReason != "" {
				finish[ch.Index] = ch.FinishReason
			}
		}
	}
	if id != "cmpl-uqkvlQyYK7bGYrRHQ0eXlWi7" {
		t.Errorf("id = %q", id)
	}
	if diff := cmp.Diff(map[string]bool{"text_completion": true}, objects); diff != "" {
		t.Errorf("objects (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]string{0: "\n\nThis is indeed a test", 1: ""}, texts); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[int]string{0: "length", 1: "stop"}, finish); diff != "" {
		t.Errorf("finish reasons (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(&goopenai.Usage{PromptTokens: 5, CompletionTokens: 7, TotalTokens: 12}, usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
}

// TestReplayWithoutUsageSDK: a client that did not ask for usage sees no
// usage chunk and no usage field.
func TestReplayWithoutUsageSDK(t *testing.T) {
	c := sdkClient(t, replay(t, openai.ChatCompletionsPath, []byte(bodyChatText), false))
	s, err := c.CreateChatCompletionStream(context.Background(), goopenai.ChatCompletionRequest{
		Model:    "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: "Hello"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got := collectChat(t, s)
	if got.Usage != (goopenai.Usage{}) {
		t.Errorf("usage = %+v, want none", got.Usage)
	}
	if want := "\n\nHello there, how may I assist you today? é世😀 \"quoted\" <tag>"; got.Choices[0].Message.Content != want {
		t.Errorf("content = %q, want %q", got.Choices[0].Message.Content, want)
	}
}

func TestReplaySplitsAtRuneBoundaries(t *testing.T) {
	events := replay(t, openai.ChatCompletionsPath, longBody(t), false)
	var content strings.Builder
	pieces := 0
	for _, ev := range events[:len(events)-1] {
		var c goopenai.ChatCompletionStreamResponse
		if err := json.Unmarshal(sse.Data(ev), &c); err != nil {
			t.Fatal(err)
		}
		if d := c.Choices[0].Delta.Content; d != "" {
			pieces++
			if !utf8.ValidString(d) {
				t.Errorf("piece %d is not valid UTF-8", pieces)
			}
			content.WriteString(d)
		}
	}
	var body goopenai.ChatCompletionResponse
	if err := json.Unmarshal(longBody(t), &body); err != nil {
		t.Fatal(err)
	}
	if content.String() != body.Choices[0].Message.Content {
		t.Error("pieces do not concatenate to the content")
	}
	if pieces < 2 {
		t.Errorf("%d content pieces, want several", pieces)
	}
}

func BenchmarkReplay2KiB(b *testing.B) {
	body, err := json.Marshal(map[string]any{
		"id": "chatcmpl-bench", "object": "chat.completion", "created": 1741570283, "model": "gpt-4o-2024-08-06",
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": strings.Repeat("The quick brown fox jumps over the lazy dog. ", 42), "refusal": nil},
			"logprobs": nil, "finish_reason": "stop",
		}},
		"usage":              json.RawMessage(usageJSON),
		"service_tier":       "default",
		"system_fingerprint": "fp_eb9dce56a8",
	})
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := openai.Replay(openai.ChatCompletionsPath, body, true); err != nil {
			b.Fatal(err)
		}
	}
}
