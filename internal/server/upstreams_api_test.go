package server

import "testing"

// TestAPIOfAnthropicPaths: every path of Anthropic's API goes to its
// upstreams, "/messages/" (a trailing slash) included, as its errors take
// Anthropic's shape.
func TestAPIOfAnthropicPaths(t *testing.T) {
	for p, want := range map[string]string{
		"/messages": apiAnthropic, "/messages/": apiAnthropic, "/messages/count_tokens": apiAnthropic,
		"/messages/batches/x": apiAnthropic, "/messagesx": apiOpenAI, "/chat/completions": apiOpenAI,
	} {
		if got := apiOf(p); got != want {
			t.Errorf("apiOf(%q) = %q; want %q", p, got, want)
		}
		if isAnthropicPath("/v1"+p) != (want == apiAnthropic) {
			t.Errorf("isAnthropicPath(%q) disagrees with apiOf", "/v1"+p)
		}
	}
}
