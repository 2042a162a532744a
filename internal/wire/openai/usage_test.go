package openai

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/wire"
)

func TestUsageReadsCachedTokensAndModel(t *testing.T) {
	tests := []struct {
		name, give string
		want       wire.Usage
	}{
		{"chat with cached input", `{"model":"gpt-4o-mini-2024-07-18","usage":{"prompt_tokens":1000,"completion_tokens":200,"prompt_tokens_details":{"cached_tokens":400}}}`,
			wire.Usage{Prompt: 1000, Completion: 200, Cached: 400, Model: "gpt-4o-mini-2024-07-18", Known: true}},
		{"embeddings", `{"object":"list","model":"text-embedding-3-small","usage":{"prompt_tokens":8,"total_tokens":8}}`,
			wire.Usage{Prompt: 8, Model: "text-embedding-3-small", Known: true}},
		{"no usage", `{"model":"m"}`, wire.Usage{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Format{}.Usage([]byte(tt.give))); diff != "" {
				t.Errorf("Usage (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStreamUsageReadsCachedTokensAndModel(t *testing.T) {
	a := Format{}.NewAssembler(ChatCompletionsPath)
	for _, ev := range []string{
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n",
		`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024-07-18","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":2,"prompt_tokens_details":{"cached_tokens":10}}}` + "\n\n",
		"data: [DONE]\n\n",
	} {
		a.Add([]byte(ev))
	}
	_, u, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	want := wire.Usage{Prompt: 30, Completion: 2, Cached: 10, Model: "gpt-4o-mini-2024-07-18", Known: true}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
}

// TestUnbelievableUsageIsUnread: a usage object with a figure that cannot
// be true (negative, fractional, a string, beyond wire.MaxTokens, more
// cached than prompt tokens) or without prompt_tokens is unread, whole
// answer or stream, so its call is charged its estimate.
func TestUnbelievableUsageIsUnread(t *testing.T) {
	for _, usage := range []string{
		`{"prompt_tokens":-1000,"completion_tokens":-5,"total_tokens":-1005}`,
		`{"prompt_tokens":1000,"completion_tokens":-5,"total_tokens":995}`,
		`{"prompt_tokens":1000.5,"completion_tokens":5,"total_tokens":1005}`,
		`{"prompt_tokens":"1000","completion_tokens":"5","total_tokens":"1005"}`,
		`{"prompt_tokens":9223372036854775807,"completion_tokens":5,"total_tokens":9223372036854775807}`,
		`{"prompt_tokens":1073741825,"completion_tokens":5}`,
		`{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":11}}`,
		`{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":-1}}`,
		`{"completion_tokens":5}`,
		`{"prompt_tokens":null,"completion_tokens":5}`,
	} {
		body := `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":` + usage + `}`
		if u := (Format{}).Usage([]byte(body)); u != (wire.Usage{}) {
			t.Errorf("%s: Usage = %+v; want unread", usage, u)
		}
		a := Format{}.NewAssembler(ChatCompletionsPath)
		for _, ev := range []string{
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"hi"},"finish_reason":"stop"}]}` + "\n\n",
			`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":` + usage + `}` + "\n\n",
			"data: [DONE]\n\n",
		} {
			a.Add([]byte(ev))
		}
		if _, u, err := a.Finish(); err != nil || u != (wire.Usage{}) {
			t.Errorf("%s streamed: %+v, %v; want unread usage, no error", usage, u, err)
		}
	}
}
