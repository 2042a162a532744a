package telemetry

import "testing"

// TestGenAIProviderName: each provider of the upstreams file maps to the
// conventions' gen_ai.provider.name value.
func TestGenAIProviderName(t *testing.T) {
	tests := []struct{ give, want string }{
		{"openai", "openai"},
		{"anthropic", "anthropic"},
		{"azure", "azure.ai.openai"},
		{"bedrock", "aws.bedrock"},
		{"vertex", "gcp.vertex_ai"},
	}
	for _, tt := range tests {
		if got := GenAIProviderName(tt.give); got != tt.want {
			t.Errorf("GenAIProviderName(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
}
