package config

import (
	"strings"
	"testing"
)

func fakeEnv(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseUpstreams(t *testing.T) {
	file := `upstreams:
  - name: openai-a
    url: https://api.openai.com/v1
    api_key_env: KEY_A
    models: ["gpt-4o*", "o3"]
    weight: 3
    headers: {OpenAI-Project: proj_x}
  - name: azure
    url: https://example.openai.azure.com/openai/deployments/x?api-version=2024-10-21
    auth: api-key
    api_key_env: KEY_AZ
    priority: 1
    timeout: 30s
  - name: claude
    url: https://api.anthropic.com/v1
    api: anthropic
    api_key_env: KEY_C
  - name: vllm
    url: http://127.0.0.1:8000/v1
    models: ["llama-*"]
`
	ups, err := ParseUpstreams("u.yaml", []byte(file), fakeEnv(map[string]string{"KEY_A": "sk-a", "KEY_AZ": "az", "KEY_C": "sk-ant"}))
	if err != nil {
		t.Fatal(err)
	}
	if len(ups) != 4 {
		t.Fatalf("%d upstreams", len(ups))
	}
	a, az, c, v := ups[0], ups[1], ups[2], ups[3]
	if a.API != "openai" || a.Auth != "bearer" || a.APIKey != "sk-a" || a.Weight != 3 || a.Headers["OpenAI-Project"] != "proj_x" {
		t.Errorf("openai-a = %+v", a)
	}
	if az.Auth != "api-key" || az.Priority != 1 || az.Timeout.Duration.String() != "30s" {
		t.Errorf("azure = %+v", az)
	}
	if c.API != "anthropic" || c.Auth != "x-api-key" || c.APIKey != "sk-ant" {
		t.Errorf("claude = %+v", c)
	}
	if v.APIKey != "" || v.Weight != 1 {
		t.Errorf("vllm = %+v", v)
	}
}

func TestParseUpstreamsErrors(t *testing.T) {
	tests := []struct{ give, want string }{
		{"upstreams: []\n", "u.yaml:1: upstreams: at least one upstream is required"},
		{"upstreams:\n  - name: Bad Name\n    url: http://x/v1\n", "u.yaml:2: upstreams[0].name: bad name \"Bad Name\""},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n  - name: a\n    url: http://y/v1\n", "u.yaml:4: upstreams[1].name: duplicate name \"a\" (also upstreams[0])"},
		{"upstreams:\n  - name: a\n    url: ftp://x\n", "u.yaml:3: upstreams[0].url: must be an http(s) base URL"},
		{"upstreams:\n  - name: a\n    url: https://user:pw@x/v1\n", "upstreams[0].url: must be an http(s) base URL such as https://api.openai.com/v1, with no credentials in it"},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    api: gemini\n", "u.yaml:4: upstreams[0].api: bad api \"gemini\""},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    auth: basic\n", "u.yaml:4: upstreams[0].auth: bad auth \"basic\""},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    api_key_env: MISSING\n", "u.yaml:4: upstreams[0].api_key_env: the environment variable MISSING is not set"},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    models: [\"[gpt\"]\n", "upstreams[0].models[0]: bad glob \"[gpt\""},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    weight: 0\n", "u.yaml:4: upstreams[0].weight: must be at least 1"},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    timeout: soon\n", "u.yaml:4: upstreams[0].timeout: bad duration \"soon\""},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    headers: {Authorization: Bearer sk-x}\n", "upstreams[0].headers.Authorization: credentials go in api_key_env, never in the file"},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    priority: lots\n", "upstreams[0].priority"},
		{"upstreams:\n  - name: a\n    url: http://x/v1\n    colour: red\n", "u.yaml:4"},
		{"", "upstreams file u.yaml: the file is empty"},
	}
	for _, tt := range tests {
		_, err := ParseUpstreams("u.yaml", []byte(tt.give), fakeEnv(nil))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "upstreams file u.yaml") {
			t.Errorf("%q: error %v; want one containing %q", tt.give, err, tt.want)
		}
	}
	// The key's value never shows in an error.
	_, err := ParseUpstreams("u.yaml", []byte("upstreams:\n  - name: a\n    url: http://x/v1\n    api_key_env: K\n    weight: -1\n"), fakeEnv(map[string]string{"K": "sk-secret-value"}))
	if err == nil || strings.Contains(err.Error(), "sk-secret-value") {
		t.Errorf("error %v", err)
	}
}
