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
