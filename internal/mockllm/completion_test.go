package mockllm_test

import (
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

type textCompletion struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Model   string `json:"model"`
	Choices []struct {
		Text         string `json:"text"`
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

func TestCompletion(t *testing.T) {
	tests := []struct {
		name      string
		give      string
		wantTexts []string
		wantUsage usage
	}{
		{
			name:      "string prompt",
			give:      `{"model":"gpt-3.5-turbo-instruct","prompt":"say this is a test"}`,
			wantTexts: []string{"mock reply to: say this is a test"},
			wantUsage: usage{5, 8, 13},
		},
		{
			name:      "prompt array and n",
			give:      `{"model":"gpt-3.5-turbo-instruct","prompt":["a b","c"],"n":2}`,
			wantTexts: []string{"mock reply to: a b", "mock reply to: a b", "mock reply to: c", "mock reply to: c"},
			wantUsage: usage{3, 5 + 5 + 4 + 4, 3 + 18},
		},
		{
			name:      "token prompt",
			give:      `{"model":"gpt-3.5-turbo-instruct","prompt":[1, 2, 3]}`,
			wantTexts: []string{"mock reply to: [1,2,3]"},
			wantUsage: usage{1, 4, 5},
		},
		{
			name:      "reply override",
			give:      `{"model":"gpt-3.5-turbo-instruct","prompt":"x","mock":{"reply":"exact words"}}`,
			wantTexts: []string{"exact words"},
			wantUsage: usage{1, 2, 3},
		},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := post(t, ts, "/v1/completions", tt.give)
			if status != 200 {
				t.Fatalf("status = %d, want 200; body %s", status, body)
			}
			c := decode[textCompletion](t, body)
			if c.Object != "text_completion" || c.Model != "gpt-3.5-turbo-instruct" || len(c.ID) < 6 || c.ID[:5] != "cmpl-" {
				t.Errorf("id, object, model = %q, %q, %q", c.ID, c.Object, c.Model)
			}
			if len(c.Choices) != len(tt.wantTexts) {
				t.Fatalf("got %d choices, want %d", len(c.Choices), len(tt.wantTexts))
			}
			for i, ch := range c.Choices {
				if ch.Text != tt.wantTexts[i] || ch.Index != i || ch.FinishReason != "stop" {
					t.Errorf("choice %d = %+v, want %q, index %d, stop", i, ch, tt.wantTexts[i], i)
				}
			}
			if c.Usage != tt.wantUsage {
				t.Errorf("usage = %+v, want %+v", c.Usage, tt.wantUsage)
			}
		})
	}
}

func TestCompletionStream(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 4})
	give := `{"model":"gpt-3.5-turbo-instruct","prompt":["first prompt","second"],"stream":true,"stream_options":{"include_usage":true}}`
	_, events, err := postStream(t, ts, "/v1/completions", give)
	if err != nil {
		t.Fatal(err)
	}
	got := parseStream(t, events, false)

	_, _, body := post(t, ts, "/v1/completions", plainBody(give))
	want := decode[textCompletion](t, body)

	if got.id != want.ID {
		t.Errorf("stream id = %q, plain id = %q; want the same", got.id, want.ID)
	}
	if len(got.content) != len(want.Choices) {
		t.Fatalf("streamed %d choices, want %d", len(got.content), len(want.Choices))
	}
	for i := range got.content {
		if got.content[i] != want.Choices[i].Text {
			t.Errorf("choice %d streamed %q, want %q", i, got.content[i], want.Choices[i].Text)
		}
	}
	if got.contents != 8 || got.finishes != 2 || !got.done {
		t.Errorf("contents, finishes, done = %d, %d, %v; want 8, 2, true", got.contents, got.finishes, got.done)
	}
	if got.usage == nil || *got.usage != want.Usage {
		t.Errorf("usage = %+v, want %+v", got.usage, want.Usage)
	}
}
