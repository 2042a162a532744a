package openai_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/sse"
)

// Fixtures copy the shape of OpenAI's streaming chunks
// (https://platform.goopenai.com/docs/api-reference/chat-streaming), with
// the "obfuscation" padding field newer streams carry.

const chatHeader = `"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion.chunk","created":1741570283,"model":"gpt-4o-2024-08-06","service_tier":"default","system_fingerprint":"fp_eb9dce56a8"`

const usageJSON = `{"prompt_tokens":19,"completion_tokens":10,"total_tokens":29,"prompt_tokens_details":{"cached_tokens":3,"audio_tokens":0},"completion_tokens_details":{"reasoning_tokens":4,"audio_tokens":0,"accepted_prediction_tokens":0,"rejected_prediction_tokens":0}}`

// chunk is a chat.completion.chunk with the given choices (comma-joined).
func chunk(choices ...string) string {
	return `{` + chatHeader + `,"choices":[` + strings.Join(choices, ",") + `],"usage":null,"obfuscation":"x7Qp"}`
}

// choice is one streamed chat choice; finish is raw JSON ("null", `"stop"`).
func choice(index int, delta, finish string) string {
	return choiceLP(index, delta, "null", finish)
}

func choiceLP(index int, delta, logprobs, finish string) string {
	return fmt.Sprintf(`{"index":%d,"delta":%s,"logprobs":%s,"finish_reason":%s}`, index, delta, logprobs, finish)
}

func usageChunk() string {
	return `{` + chatHeader + `,"choices":[],"usage":` + usageJSON + `,"obfuscation":"aZ"}`
}

var wantUsage = goopenai.Usage{
	PromptTokens: 19, CompletionTokens: 10, TotalTokens: 29,
	PromptTokensDetails:     &goopenai.PromptTokensDetails{CachedTokens: 3},
	CompletionTokensDetails: &goopenai.CompletionTokensDetails{ReasoningTokens: 4},
}

const roleDelta = `{"role":"assistant","content":"","refusal":null}`

var (
	streamText = []string{
		chunk(choice(0, roleDelta, "null")),
		chunk(choice(0, `{"content":"Hello"}`, "null")),
		chunk(choice(0, `{"content":"! How can I"}`, "null")),
		chunk(choice(0, `{"content":" help \"you\" today?\n"}`, "null")),
		chunk(choice(0, `{}`, `"stop"`)),
		usageChunk(),
		"[DONE]",
	}
	// Two parallel tool calls, each spread over three chunks.
	streamTools = []string{
		chunk(choice(0, `{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":""}}],"refusal":null}`, "null")),
		chunk(choice(0, `{"tool_calls":[{"index":0,"function":{"arguments":"{\"location\""}}]}`, "null")),
		chunk(choice(0, `{"tool_calls":[{"index":0,"function":{"arguments":": \"Paris, France\"}"}}]}`, "null")),
		chunk(choice(0, `{"tool_calls":[{"index":1,"id":"call_ABC123","type":"function","function":{"name":"get_time","arguments":""}}]}`, "null")),
		chunk(choice(0, `{"tool_calls":[{"index":1,"function":{"arguments":"{\"tz\":"}}]}`, "null")),
		chunk(choice(0, `{"tool_calls":[{"index":1,"function":{"arguments":" \"CET\"}"}}]}`, "null")),
		chunk(choice(0, `{}`, `"tool_calls"`)),
		usageChunk(),
		"[DONE]",
	}
	// n=2: the choices interleave, index 1 starts first, and one chunk
	// carries both.
	streamN2 = []string{
		chunk(choice(1, roleDelta, "null")),
		chunk(choice(0, roleDelta, "null")),
		chunk(choice(0, `{"content":"Red"}`, "null")),
		chunk(choice(1, `{"content":"Blue"}`, "null")),
		chunk(choice(1, `{"content":" sky"}`, "null"), choice(0, `{"content":" rose"}`, "null")),
		chunk(choice(1, `{}`, `"length"`)),
		chunk(choice(0, `{}`, `"stop"`)),
		usageChunk(),
		"[DONE]",
	}
	streamRefusal = []string{
		chunk(choice(0, `{"role":"assistant","content":null,"refusal":""}`, "null")),
		chunk(choice(0, `{"refusal":"I'm sorry,"}`, "null")),
		chunk(choice(0, `{"refusal":" I can't help with that."}`, "null")),
		chunk(choice(0, `{}`, `"stop"`)),
		"[DONE]",
	}
	streamFunctionCall = []string{
		chunk(choice(0, `{"role":"assistant","content":null,"function_call":{"name":"get_weather","arguments":""}}`, "null")),
		chunk(choice(0, `{"function_call":{"arguments":"{\"loc"}}`, "null")),
		chunk(choice(0, `{"function_call":{"arguments":"\":\"NYC\"}"}}`, "null")),
		chunk(choice(0, `{}`, `"function_call"`)),
		"[DONE]",
	}
	streamLogprobs = []string{
		chunk(choiceLP(0, roleDelta, `{"content":[],"refusal":null}`, "null")),
		chunk(choiceLP(0, `{"content":"Hi"}`, `{"content":[{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[]}],"refusal":null}`, "null")),
		chunk(choiceLP(0, `{"content":"!"}`, `{"content":[{"token":"!","logprob":-0.5,"bytes":[33],"top_logprobs":[]}],"refusal":null}`, "null")),
		chunk(choice(0, `{}`, `"stop"`)),
		"[DONE]",
	}
)

const (
	completionHeader = `"id":"cmpl-8Xn2yqQ1BvTq9","object":"text_completion","created":1702400000`
	completionTail   = `"model":"gpt-3.5-turbo-instruct","system_fingerprint":"fp_44709d6fcb","usage":null`
)

func textChunk(choices ...string) string {
	return `{` + completionHeader + `,"choices":[` + strings.Join(choices, ",") + `],` + completionTail + `}`
}

func textChoice(index int, text, finish string) string {
	return fmt.Sprintf(`{"text":%s,"index":%d,"logprobs":null,"finish_reason":%s}`, text, index, finish)
}

var streamCompletion = []string{
	textChunk(textChoice(0, `"\n\nThis"`, "null")),
	textChunk(textChoice(1, `"That"`, "null")),
	textChunk(textChoice(0, `" is a"`, "null"), textChoice(1, `" was"`, "null")),
	textChunk(textChoice(0, `" test."`, "null")),
	textChunk(textChoice(0, `""`, `"stop"`)),
	textChunk(textChoice(1, `""`, `"length"`)),
	`{` + completionHeader + `,"choices":[],"model":"gpt-3.5-turbo-instruct","system_fingerprint":"fp_44709d6fcb","usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`,
	"[DONE]",
}

// assemble feeds data payloads to a new Assembler and fails on an Add error.
func assemble(tb testing.TB, endpoint string, stream []string) *openai.Assembler {
	tb.Helper()
	a := openai.NewAssembler(endpoint)
	for i, d := range stream {
		if err := a.Add([]byte(d)); err != nil {
			tb.Fatalf("Add(event %d): %v", i, err)
		}
	}
	return a
}

func assembledBody(tb testing.TB, endpoint string, stream []string) []byte {
	tb.Helper()
	a := assemble(tb, endpoint, stream)
	if !a.Complete() {
		tb.Fatal("Complete() = false, want true")
	}
	body, err := a.Body()
	if err != nil {
		tb.Fatalf("Body: %v", err)
	}
	return body
}

func ptr[T any](v T) *T { return &v }

var ignoreHeader = cmpopts.IgnoreUnexported(goopenai.ChatCompletionResponse{}, goopenai.CompletionResponse{})

func TestAssemblerChat(t *testing.T) {
	base := goopenai.ChatCompletionResponse{
		ID:                "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
		Object:            "chat.completion",
		Created:           1741570283,
		Model:             "gpt-4o-2024-08-06",
		SystemFingerprint: "fp_eb9dce56a8",
		ServiceTier:       "default",
	}
	with := func(choices []goopenai.ChatCompletionChoice, usage goopenai.Usage) goopenai.ChatCompletionResponse {
		r := base
		r.Choices, r.Usage = choices, usage
		return r
	}
	tests := []struct {
		name string
		give []string
		want goopenai.ChatCompletionResponse
	}{
		{
			name: "text with usage",
			give: streamText,
			want: with([]goopenai.ChatCompletionChoice{{
				Index:        0,
				Message:      goopenai.ChatCompletionMessage{Role: "assistant", Content: "Hello! How can I help \"you\" today?\n"},
				FinishReason: goopenai.FinishReasonStop,
			}}, wantUsage),
		},
		{
			name: "parallel tool calls across chunks",
			give: streamTools,
			want: with([]goopenai.ChatCompletionChoice{{
				Message: goopenai.ChatCompletionMessage{Role: "assistant", ToolCalls: []goopenai.ToolCall{
					{ID: "call_DdmO9pD3xa9XTPNJ32zg2hcA", Type: goopenai.ToolTypeFunction, Function: goopenai.FunctionCall{Name: "get_weather", Arguments: `{"location": "Paris, France"}`}},
					{ID: "call_ABC123", Type: goopenai.ToolTypeFunction, Function: goopenai.FunctionCall{Name: "get_time", Arguments: `{"tz": "CET"}`}},
				}},
				FinishReason: goopenai.FinishReasonToolCalls,
			}}, wantUsage),
		},
		{
			name: "two interleaved choices",
			give: streamN2,
			want: with([]goopenai.ChatCompletionChoice{
				{Index: 0, Message: goopenai.ChatCompletionMessage{Role: "assistant", Content: "Red rose"}, FinishReason: goopenai.FinishReasonStop},
				{Index: 1, Message: goopenai.ChatCompletionMessage{Role: "assistant", Content: "Blue sky"}, FinishReason: goopenai.FinishReasonLength},
			}, wantUsage),
		},
		{
			name: "refusal",
			give: streamRefusal,
			want: with([]goopenai.ChatCompletionChoice{{
				Message:      goopenai.ChatCompletionMessage{Role: "assistant", Refusal: "I'm sorry, I can't help with that."},
				FinishReason: goopenai.FinishReasonStop,
			}}, goopenai.Usage{}),
		},
		{
			name: "legacy function_call",
			give: streamFunctionCall,
			want: with([]goopenai.ChatCompletionChoice{{
				Message:      goopenai.ChatCompletionMessage{Role: "assistant", FunctionCall: &goopenai.FunctionCall{Name: "get_weather", Arguments: `{"loc":"NYC"}`}},
				FinishReason: goopenai.FinishReasonFunctionCall,
			}}, goopenai.Usage{}),
		},
		{
			name: "logprobs concatenated",
			give: streamLogprobs,
			want: with([]goopenai.ChatCompletionChoice{{
				Message:      goopenai.ChatCompletionMessage{Role: "assistant", Content: "Hi!"},
				FinishReason: goopenai.FinishReasonStop,
				LogProbs: &goopenai.LogProbs{Content: []goopenai.LogProb{
					{Token: "Hi", LogProb: -0.25, Bytes: []byte{72, 105}, TopLogProbs: []goopenai.TopLogProbs{}},
					{Token: "!", LogProb: -0.5, Bytes: []byte{33}, TopLogProbs: []goopenai.TopLogProbs{}},
				}},
			}}, goopenai.Usage{}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := assembledBody(t, openai.ChatCompletionsPath, tt.give)
			var got goopenai.ChatCompletionResponse
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("unmarshal %s: %v", body, err)
			}
			if diff := cmp.Diff(tt.want, got, ignoreHeader); diff != "" {
				t.Errorf("body mismatch (-want +got):\n%s\nbody: %s", diff, body)
			}
		})
	}
}

// TestAssemblerChatBody pins the exact bytes: OpenAI's field order, and
// content/refusal null where OpenAI has null.
func TestAssemblerChatBody(t *testing.T) {
	const head = `{"id":"chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG","object":"chat.completion","created":1741570283,"model":"gpt-4o-2024-08-06","choices":[`
	const tail = `,"service_tier":"default","system_fingerprint":"fp_eb9dce56a8"}`
	tests := []struct {
		name string
		give []string
		want string
	}{
		{
			name: "text",
			give: streamText,
			want: head + `{"index":0,"message":{"role":"assistant","content":"Hello! How can I help \"you\" today?\n","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":` + usageJSON + tail,
		},
		{
			name: "tool calls",
			give: streamTools,
			want: head + `{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[` +
				`{"id":"call_DdmO9pD3xa9XTPNJ32zg2hcA","type":"function","function":{"name":"get_weather","arguments":"{\"location\": \"Paris, France\"}"}},` +
				`{"id":"call_ABC123","type":"function","function":{"name":"get_time","arguments":"{\"tz\": \"CET\"}"}}]},"logprobs":null,"finish_reason":"tool_calls"}],"usage":` + usageJSON + tail,
		},
		{
			name: "refusal",
			give: streamRefusal,
			want: head + `{"index":0,"message":{"role":"assistant","content":null,"refusal":"I'm sorry, I can't help with that."},"logprobs":null,"finish_reason":"stop"}]` + tail,
		},
		{
			name: "logprobs",
			give: streamLogprobs,
			want: head + `{"index":0,"message":{"role":"assistant","content":"Hi!","refusal":null},"logprobs":{"content":[{"token":"Hi","logprob":-0.25,"bytes":[72,105],"top_logprobs":[]},{"token":"!","logprob":-0.5,"bytes":[33],"top_logprobs":[]}],"refusal":null},"finish_reason":"stop"}]` + tail,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := assembledBody(t, openai.ChatCompletionsPath, tt.give)
			if string(got) != tt.want {
				t.Errorf("Body() =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func TestAssemblerCompletions(t *testing.T) {
	body := assembledBody(t, openai.CompletionsPath, streamCompletion)
	const want = `{"id":"cmpl-8Xn2yqQ1BvTq9","object":"text_completion","created":1702400000,"model":"gpt-3.5-turbo-instruct","choices":[` +
		`{"text":"\n\nThis is a test.","index":0,"logprobs":null,"finish_reason":"stop"},` +
		`{"text":"That was","index":1,"logprobs":null,"finish_reason":"length"}],` +
		`"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12},"system_fingerprint":"fp_44709d6fcb"}`
	if string(body) != want {
		t.Errorf("Body() =\n%s\nwant\n%s", body, want)
	}
	var got goopenai.CompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Text != "\n\nThis is a test." || got.Usage.CompletionTokens != 7 {
		t.Errorf("SDK sees %+v", got)
	}
}

func TestAssemblerCompletionsLogprobs(t *testing.T) {
	stream := []string{
		textChunk(`{"text":"Hi","index":0,"logprobs":{"tokens":["Hi"],"token_logprobs":[-0.1],"top_logprobs":[{"Hi":-0.1}],"text_offset":[7]},"finish_reason":null}`),
		textChunk(`{"text":"!","index":0,"logprobs":{"tokens":["!"],"token_logprobs":[-0.2],"top_logprobs":[{"!":-0.2}],"text_offset":[9]},"finish_reason":"stop"}`),
		"[DONE]",
	}
	body := assembledBody(t, openai.CompletionsPath, stream)
	var got goopenai.CompletionResponse
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	want := goopenai.LogprobResult{
		Tokens:        []string{"Hi", "!"},
		TokenLogprobs: []float32{-0.1, -0.2},
		TopLogprobs:   []map[string]float32{{"Hi": -0.1}, {"!": -0.2}},
		TextOffset:    []int{7, 9},
	}
	if diff := cmp.Diff(want, got.Choices[0].LogProbs); diff != "" {
		t.Errorf("logprobs (-want +got):\n%s", diff)
	}
}

func TestAssemblerIncomplete(t *testing.T) {
	tests := []struct {
		name    string
		give    []string
		wantErr bool // from the last Add
	}{
		{name: "no [DONE]", give: streamText[:len(streamText)-1]},
		{name: "cut before finish_reason", give: append(append([]string{}, streamText[:3]...), "[DONE]")},
		{name: "one of two choices unfinished", give: []string{streamN2[0], streamN2[1], streamN2[5], "[DONE]"}},
		{name: "no choices", give: []string{usageChunk(), "[DONE]"}},
		{name: "only [DONE]", give: []string{"[DONE]"}},
		{name: "nothing", give: nil},
		{name: "empty finish_reason", give: []string{chunk(choice(0, `{"content":"x"}`, `""`)), "[DONE]"}},
		{name: "error event", give: []string{streamText[0], `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`, "[DONE]"}, wantErr: true},
		{name: "invalid JSON", give: []string{streamText[0], `{"id":"chatcmpl-1","choices":[{"index":0,"delta":{"content":"Hel`}, wantErr: true},
		{name: "not an object", give: []string{`"hello"`}, wantErr: true},
		{name: "null", give: []string{`null`}, wantErr: true},
		{name: "wrong type", give: []string{`{"choices":[{"index":"0"}]}`}, wantErr: true},
		{name: "data after [DONE]", give: append(append([]string{}, streamText...), streamText[1]), wantErr: true},
		{name: "valid after failure", give: append([]string{`{oops`}, streamText...), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := openai.NewAssembler(openai.ChatCompletionsPath)
			var err error
			for _, d := range tt.give {
				err = a.Add([]byte(d))
			}
			if (err != nil) != tt.wantErr {
				t.Errorf("last Add error = %v, want error %v", err, tt.wantErr)
			}
			if a.Complete() {
				t.Error("Complete() = true, want false")
			}
			if _, err := a.Body(); !errors.Is(err, openai.ErrIncompleteStream) {
				t.Errorf("Body() error = %v, want ErrIncompleteStream", err)
			}
		})
	}
}

func TestAssemblerErrorEvent(t *testing.T) {
	a := openai.NewAssembler(openai.ChatCompletionsPath)
	err := a.Add([]byte(`{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}`))
	if !errors.Is(err, openai.ErrErrorEvent) || !strings.Contains(err.Error(), "Rate limit reached") {
		t.Errorf("Add(error event) = %v, want ErrErrorEvent with the message", err)
	}
	if _, err := a.Body(); !errors.Is(err, openai.ErrErrorEvent) {
		t.Errorf("Body() error = %v, want it to wrap the Add error", err)
	}
}

func TestAssemblerUnsupportedEndpoint(t *testing.T) {
	a := openai.NewAssembler("/embeddings")
	if err := a.Add([]byte(streamText[0])); !errors.Is(err, openai.ErrUnsupportedEndpoint) {
		t.Errorf("Add = %v, want ErrUnsupportedEndpoint", err)
	}
	if a.Complete() {
		t.Error("Complete() = true")
	}
}

func TestAssemblerUsage(t *testing.T) {
	tests := []struct {
		name                  string
		endpoint              string
		give                  []string
		wantPrompt, wantCompl int
		wantOK                bool
	}{
		{name: "chat usage chunk", endpoint: openai.ChatCompletionsPath, give: streamText, wantPrompt: 19, wantCompl: 10, wantOK: true},
		{name: "chat without usage", endpoint: openai.ChatCompletionsPath, give: streamRefusal},
		{name: "completions", endpoint: openai.CompletionsPath, give: streamCompletion, wantPrompt: 5, wantCompl: 7, wantOK: true},
		{name: "usage before the end", endpoint: openai.ChatCompletionsPath, give: streamText[5:6], wantPrompt: 19, wantCompl: 10, wantOK: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, c, ok := assemble(t, tt.endpoint, tt.give).Usage()
			if p != tt.wantPrompt || c != tt.wantCompl || ok != tt.wantOK {
				t.Errorf("Usage() = %d, %d, %v; want %d, %d, %v", p, c, ok, tt.wantPrompt, tt.wantCompl, tt.wantOK)
			}
		})
	}
}

// TestAssemblerTolerates covers what OpenAI-compatible servers do
// differently from OpenAI.
func TestAssemblerTolerates(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string // the choices array
	}{
		{
			name: "azure prompt_filter_results chunk first, keep-alives",
			give: []string{
				`{"choices":[],"created":0,"id":"","model":"","object":"","prompt_filter_results":[{"prompt_index":0,"content_filter_results":{}}]}`,
				"",
				chunk(choice(0, `{"content":"ok"}`, `"stop"`)),
				"[DONE]",
			},
			want: `[{"index":0,"message":{"role":"assistant","content":"ok","refusal":null},"logprobs":null,"finish_reason":"stop"}]`,
		},
		{
			name: "tool calls without index, id repeated",
			give: []string{
				chunk(choice(0, `{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]}`, "null")),
				chunk(choice(0, `{"tool_calls":[{"function":{"arguments":":1}"}}]}`, "null")),
				chunk(choice(0, `{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]}`, "null")),
				chunk(choice(0, `{"tool_calls":[{"index":1,"id":"call_2","function":{"arguments":""}}]}`, `"tool_calls"`)),
				"[DONE]",
			},
			want: `[{"index":0,"message":{"role":"assistant","content":null,"refusal":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}},{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"logprobs":null,"finish_reason":"tool_calls"}]`,
		},
		{
			name: "reasoning_content and annotations",
			give: []string{
				chunk(choice(0, `{"role":"assistant","reasoning_content":"Think"}`, "null")),
				chunk(choice(0, `{"reasoning_content":"ing.","content":"Done <b>&</b>"}`, "null")),
				chunk(choice(0, `{"annotations":[{"type":"url_citation","url_citation":{"url":"https://example.com","title":"Ex"}}]}`, `"stop"`)),
				"[DONE]",
			},
			want: `[{"index":0,"message":{"role":"assistant","content":"Done <b>&</b>","reasoning_content":"Thinking.","refusal":null,"annotations":[{"type":"url_citation","url_citation":{"url":"https://example.com","title":"Ex"}}]},"logprobs":null,"finish_reason":"stop"}]`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := assembledBody(t, openai.ChatCompletionsPath, tt.give)
			var got struct{ Choices json.RawMessage }
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatal(err)
			}
			if string(got.Choices) != tt.want {
				t.Errorf("choices =\n%s\nwant\n%s", got.Choices, tt.want)
			}
		})
	}
}

// TestAssemblerCopiesData checks that Add keeps nothing of its argument:
// EventReader reuses its buffer for the next event.
func TestAssemblerCopiesData(t *testing.T) {
	a := openai.NewAssembler(openai.ChatCompletionsPath)
	buf := make([]byte, 0, 4096)
	for _, d := range streamTools {
		buf = append(buf[:0], d...)
		if err := a.Add(buf); err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
	}
	got, err := a.Body()
	if err != nil {
		t.Fatal(err)
	}
	if want := assembledBody(t, openai.ChatCompletionsPath, streamTools); !bytes.Equal(got, want) {
		t.Errorf("Body() after buffer reuse =\n%s\nwant\n%s", got, want)
	}
}

// FuzzAssemblerAdd feeds arbitrary events (one per line) and checks that
// nothing panics, that a complete stream yields valid JSON, and that the
// body survives Replay and reassembly unchanged.
func FuzzAssemblerAdd(f *testing.F) {
	for _, s := range [][]string{streamText, streamTools, streamN2, streamRefusal, streamFunctionCall, streamLogprobs} {
		f.Add(true, []byte(strings.Join(s, "\n")))
	}
	f.Add(false, []byte(strings.Join(streamCompletion, "\n")))
	f.Add(true, []byte(`{"choices":[{"index":-9223372036854775808,"delta":{"tool_calls":[{"index":9223372036854775807}]},"finish_reason":"x"}]}`+"\n[DONE]"))
	f.Fuzz(func(t *testing.T, chat bool, data []byte) {
		endpoint := openai.CompletionsPath
		if chat {
			endpoint = openai.ChatCompletionsPath
		}
		a := openai.NewAssembler(endpoint)
		for line := range bytes.SplitSeq(data, []byte{'\n'}) {
			_ = a.Add(line) // errors are expected; panics are not
		}
		a.Usage()
		body, err := a.Body()
		if !a.Complete() {
			return
		}
		if err != nil || !json.Valid(body) {
			t.Fatalf("complete stream: Body() = %q, %v", body, err)
		}
		events, err := openai.Replay(endpoint, body, true)
		if err != nil {
			t.Fatalf("Replay(%s): %v", body, err)
		}
		b := openai.NewAssembler(endpoint)
		for _, ev := range events {
			if err := b.Add(sse.Data(ev)); err != nil {
				t.Fatalf("re-Add(%q): %v", ev, err)
			}
		}
		again, err := b.Body()
		if err != nil {
			t.Fatalf("reassembled Body: %v", err)
		}
		if !bytes.Equal(compactJSON(t, again), compactJSON(t, body)) {
			t.Fatalf("round trip changed the body:\n%s\n%s", body, again)
		}
	})
}

func compactJSON(tb testing.TB, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		tb.Fatalf("compact %s: %v", b, err)
	}
	return buf.Bytes()
}

// benchStream is a 50-event stream: role, 47 content chunks, finish, usage,
// plus [DONE].
func benchStream() [][]byte {
	out := [][]byte{[]byte(chunk(choice(0, roleDelta, "null")))}
	for i := range 47 {
		out = append(out, []byte(chunk(choice(0, fmt.Sprintf(`{"content":" token%d"}`, i), "null"))))
	}
	out = append(out, []byte(chunk(choice(0, `{}`, `"stop"`))), []byte(usageChunk()), []byte("[DONE]"))
	return out
}

func BenchmarkAssemble50(b *testing.B) {
	stream := benchStream()
	n := 0
	for _, d := range stream {
		n += len(d)
	}
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		a := openai.NewAssembler(openai.ChatCompletionsPath)
		for _, d := range stream {
			if err := a.Add(d); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := a.Body(); err != nil {
			b.Fatal(err)
		}
	}
}

// TestAssemblerRefusesWhatItCannotRebuild: a chunk member the assembler
// has no place for, with a value, at any level (delta.audio, a field of a
// newer API), makes the stream unstorable; a null one, or a member it
// drops on purpose, does not.
func TestAssemblerRefusesWhatItCannotRebuild(t *testing.T) {
	const head = `{"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-audio-preview","choices":[`
	tests := []struct {
		name  string
		give  []string
		store bool
	}{
		{"audio deltas", []string{
			head + `{"index":0,"delta":{"role":"assistant","content":null,"audio":{"id":"audio_1","data":"UklG","transcript":"Hel","expires_at":1735693200}},"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"audio":{"data":"RgAA","transcript":"lo"}},"finish_reason":null}]}`,
			head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		}, false},
		{"audio on a later chunk", []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null}]}`,
			head + `{"index":0,"delta":{"audio":{"transcript":"Hi"}},"finish_reason":"stop"}]}`,
		}, false},
		{"an unknown top-level member", []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}],"citations":["https://example.com"]}`,
		}, false},
		{"an unknown choice member", []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":"stop","stop_reason":"</s>"}]}`,
		}, false},
		{"an unknown tool-call member", []string{
			head + `{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":"{}","strict":true}}]},"finish_reason":"tool_calls"}]}`,
		}, false},
		{"null unknown members", []string{
			head + `{"index":0,"delta":{"role":"assistant","content":"Hi","audio":null},"finish_reason":null,"stop_reason":null}],"citations":null}`,
			head + `{"index":0,"delta":{},"finish_reason":"stop"}]}`,
		}, true},
		{"members dropped on purpose", []string{
			`{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","prompt_filter_results":[{"prompt_index":0}],"choices":[]}`,
			head + `{"index":0,"delta":{"role":"assistant","content":"Hi"},"finish_reason":null,"content_filter_results":{"hate":{"filtered":false}}}],"obfuscation":"x1"}`,
			head + `{"index":0,"delta":{},"finish_reason":"stop","native_finish_reason":"stop"}],"provider":"OpenAI"}`,
		}, true},
	}
	for _, tt := range tests {
		a := openai.NewAssembler(openai.ChatCompletionsPath)
		for _, c := range append(tt.give, "[DONE]") {
			_ = a.Add([]byte(c))
		}
		body, err := a.Body()
		if tt.store && err != nil {
			t.Errorf("%s: Body() = %v; want the answer", tt.name, err)
		}
		if !tt.store && (!errors.Is(err, openai.ErrUnassembled) || body != nil) {
			t.Errorf("%s: Body() = %s, %v; want ErrUnassembled", tt.name, body, err)
		}
	}
}
