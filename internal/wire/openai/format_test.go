package openai

import (
	"bytes"
	"testing"
)

func TestWithStreamUsage(t *testing.T) {
	tests := []struct{ give, want string }{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`},
		{"{\"model\":\"m\"  \n}\n", "{\"model\":\"m\",\"stream_options\":{\"include_usage\":true}}\n"},
		{`{"model":"m","stream_options":{"include_usage":false}}`, `{"model":"m","stream_options":{"include_usage":false}}`},
	}
	for _, tt := range tests {
		if got := string(WithStreamUsage([]byte(tt.give))); got != tt.want {
			t.Errorf("WithStreamUsage(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
	_ = bytes.MinRead
}

func TestIsUsageEvent(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"data: {\"choices\":[],\"usage\":{\"total_tokens\":3}}\n\n", true},
		{"data: {\"choices\": [], \"usage\": {\"total_tokens\": 3}}\n\n", true},
		{"data: {\"choices\":[{\"delta\":{}}],\"usage\":null}\n\n", false},
		{"data: {\"choices\":[],\"usage\":null}\n\n", false},
		{"data: [DONE]\n\n", false},
	}
	for _, tt := range tests {
		if got := IsUsageEvent([]byte(tt.give)); got != tt.want {
			t.Errorf("IsUsageEvent(%q) = %v; want %v", tt.give, got, tt.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		endpoint, give string
		want           bool
	}{
		{"/chat/completions", `{"id":"c","object":"chat.completion","choices":[]}`, true},
		{"/chat/completions", `{"id":"c","choices":[{"index":0}]}`, true}, // no object: a compatible server
		{"/chat/completions", `{"error":{"message":"boom"}}`, false},
		{"/chat/completions", `{"object":"chat.completion","choices":[],"error":{"message":"boom"}}`, false},
		{"/chat/completions", `{"object":"chat.completion","choices":[],"error":null}`, true},
		{"/chat/completions", `{"object":"text_completion","choices":[]}`, false},
		{"/chat/completions", `{"object":"chat.completion"}`, false},
		{"/chat/completions", `[1]`, false},
		{"/completions", `{"object":"text_completion","choices":[]}`, true},
		{"/completions", `{"object":"chat.completion","choices":[]}`, false},
		{"/embeddings", `{"object":"list","data":[{"object":"embedding","embedding":[0.1]}]}`, true},
		{"/embeddings", `{"object":"list","choices":[]}`, false},
		{"/embeddings", `{"error":"no"}`, false},
	}
	for _, tt := range tests {
		if got := (Format{}).Answer(tt.endpoint, []byte(tt.give)); got != tt.want {
			t.Errorf("Answer(%s, %s) = %v; want %v", tt.endpoint, tt.give, got, tt.want)
		}
	}
}
