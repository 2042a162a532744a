package openai

import (
	"testing"
)

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

func TestParseKeys(t *testing.T) {
	key := func(endpoint, body string) string {
		t.Helper()
		fx, err := Format{}.Parse("t", endpoint, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return fx.Hash
	}
	tests := []struct {
		endpoint, give, same string
		want                 bool
	}{
		{ChatCompletionsPath, `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"prompt_cache_key":"codex-1","safety_identifier":"u-hash"}`, true},
		{ChatCompletionsPath, `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"prompt_cache_key":null,"safety_identifier":null,"user":"u"}`, true},
		{ChatCompletionsPath, `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"prompt_cache_key":7}`, false},
		{ChatCompletionsPath, `{"model":"m","messages":[]}`, `{"model":"m","messages":[],"store":false}`, false},
		{ChatCompletionsPath, `{"model":"m","messages":[],"store":false}`, `{"model":"m","messages":[],"store":true}`, false},
		{ChatCompletionsPath, `{"model":"m","messages":[],"store":true}`, `{"model":"m","messages":[],"store":true,"stream":true}`, true},
		{CompletionsPath, `{"model":"m","prompt":"p"}`, `{"model":"m","prompt":"p","prompt_cache_key":"k"}`, false},
		{EmbeddingsPath, `{"model":"m","input":"p"}`, `{"model":"m","input":"p","safety_identifier":"s"}`, false},
	}
	for _, tt := range tests {
		if got := key(tt.endpoint, tt.give) == key(tt.endpoint, tt.same); got != tt.want {
			t.Errorf("%s: %s and %s share a key: %v; want %v", tt.endpoint, tt.give, tt.same, got, tt.want)
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
