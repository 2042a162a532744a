package redact

import "testing"

func TestURL(t *testing.T) {
	for _, tt := range []struct{ give, want string }{
		{"https://api.example.com/v1", "https://api.example.com/v1"},
		{"http://user:hunter2@127.0.0.1:8080/v1", "http://redacted@127.0.0.1:8080/v1"},
		{"http://user@host/v1", "http://redacted@host/v1"},
		{"https://host/openai?api-version=2024-06-01&key=sk-secret", "https://host/openai?redacted"},
		{"grpc://user:s3cret@x:4317?token=t0ken", "grpc://redacted@x:4317?redacted"},
		{"https://host/v1?", "https://host/v1?"},
		{"http://host/%zz", "(unparseable URL)"},
		{"", ""},
	} {
		if got := URL(tt.give); got != tt.want {
			t.Errorf("URL(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
}
