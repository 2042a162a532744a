package openai

import (
	"math"
	"strings"
	"testing"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		bodyBytes, maxTokens, n int
		want                    int
	}{
		{0, 0, 0, DefaultMaxTokens},
		{4, 100, 1, 1 + 100},
		{5, 100, 1, 2 + 100},
		{4000, 100, 3, 1000 + 300},
		{4000, 0, 1, 1000 + DefaultMaxTokens},
		{4000, -5, -1, 1000 + DefaultMaxTokens},
		{-10, 10, 1, 10},
		{8 << 20, math.MaxInt / 2, 3, math.MaxInt},
	}
	for _, tt := range tests {
		if got := EstimateTokens(tt.bodyBytes, tt.maxTokens, tt.n); got != tt.want {
			t.Errorf("EstimateTokens(%d, %d, %d) = %d, want %d", tt.bodyBytes, tt.maxTokens, tt.n, got, tt.want)
		}
	}
}

// TestParseEstimateCountsTheWholeBody: what the model reads beside message
// text (tool definitions, images, tool call arguments, token arrays) is
// charged like the text.
func TestParseEstimateCountsTheWholeBody(t *testing.T) {
	big := strings.Repeat("x", 4000)
	tests := []struct{ endpoint, give string }{
		{ChatCompletionsPath, `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"` + big + `"}}]}`},
		{ChatCompletionsPath, `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,` + big + `"}}]}]}`},
		{ChatCompletionsPath, `{"model":"m","messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"` + big + `"}}]}]}`},
		{CompletionsPath, `{"model":"m","prompt":[` + strings.TrimSuffix(strings.Repeat("1234,", 800), ",") + `]}`},
		{EmbeddingsPath, `{"model":"m","input":[[` + strings.TrimSuffix(strings.Repeat("1234,", 800), ",") + `]]}`},
	}
	for _, tt := range tests {
		fx, err := Format{}.Parse("t", tt.endpoint, []byte(tt.give))
		if err != nil {
			t.Fatal(err)
		}
		completion := DefaultMaxTokens
		if tt.endpoint == EmbeddingsPath {
			completion = 0
		}
		if want := (len(tt.give)+3)/4 + completion; fx.Estimate != want {
			t.Errorf("%s %.80s...: estimate %d; want %d (body bytes / 4 + completion)", tt.endpoint, tt.give, fx.Estimate, want)
		}
	}
}
