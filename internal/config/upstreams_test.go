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

func TestParseCloudUpstreams(t *testing.T) {
	file := `upstreams:
  - name: azure-east
    api: openai
    provider: azure
    url: https://contoso-east.openai.azure.com/openai/v1
    api_key_env: AZ
    aliases: {"gpt-4o*": gpt4o-prod, "gpt-4.1": gpt41}
  - name: azure-classic
    provider: azure
    url: https://contoso-west.openai.azure.com/openai
    api_version: "2024-10-21"
    auth: entra
    aliases: {"gpt-4o*": gpt4o-west}
  - name: bedrock-us
    api: anthropic
    provider: bedrock
    region: us-east-1
    aliases: {"claude-sonnet-4-5*": "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}
    priority: 1
  - name: bedrock-key
    api: openai
    provider: bedrock
    region: us-west-2
    auth: bearer
    api_key_env: BR
    models: ["gpt-oss-*"]
  - name: vertex-eu
    api: anthropic
    provider: vertex
    project: acme-ml
    region: europe-west1
    aliases: {"claude-sonnet-4-5*": "claude-sonnet-4-5@20250929"}
  - name: vertex-global
    api: anthropic
    provider: vertex
    project: acme-ml
    region: global
`
	ups, err := ParseUpstreams("u.yaml", []byte(file), fakeEnv(map[string]string{"AZ": "az-key", "BR": "br-key"}))
	if err != nil {
		t.Fatal(err)
	}
	az, cl, br, bk, vx, vg := ups[0], ups[1], ups[2], ups[3], ups[4], ups[5]
	if az.Provider != "azure" || az.Auth != "api-key" || az.APIKey != "az-key" || len(az.Aliases) != 2 ||
		az.Aliases[0] != (Alias{"gpt-4o*", "gpt4o-prod"}) || az.Aliases[1] != (Alias{"gpt-4.1", "gpt41"}) ||
		strings.Join(az.Models, ",") != "gpt-4o*,gpt-4.1" {
		t.Errorf("azure-east = %+v", az)
	}
	if cl.API != "openai" || cl.Auth != "entra" || cl.APIVersion != "2024-10-21" || cl.APIKey != "" {
		t.Errorf("azure-classic = %+v", cl)
	}
	if br.Provider != "bedrock" || br.Auth != "sigv4" || br.URL != "https://bedrock-runtime.us-east-1.amazonaws.com" ||
		br.Aliases[0].ID != "us.anthropic.claude-sonnet-4-5-20250929-v1:0" || br.Priority != 1 {
		t.Errorf("bedrock-us = %+v", br)
	}
	if bk.Auth != "bearer" || bk.APIKey != "br-key" || bk.API != "openai" || strings.Join(bk.Models, ",") != "gpt-oss-*" {
		t.Errorf("bedrock-key = %+v", bk)
	}
	if vx.Auth != "google" || vx.Project != "acme-ml" || vx.URL != "https://europe-west1-aiplatform.googleapis.com" {
		t.Errorf("vertex-eu = %+v", vx)
	}
	if vg.URL != "https://aiplatform.googleapis.com" || vg.Models != nil {
		t.Errorf("vertex-global = %+v", vg)
	}
	if ups[0].Provider != "azure" {
		t.Error(ups[0].Provider)
	}
	plain, err := ParseUpstreams("u.yaml", []byte("upstreams:\n  - name: a\n    url: http://x/v1\n  - name: c\n    api: anthropic\n    url: http://x/v1\n"), fakeEnv(nil))
	if err != nil || plain[0].Provider != "openai" || plain[1].Provider != "anthropic" {
		t.Errorf("plain upstreams: %v %+v", err, plain)
	}
}

func TestParseCloudUpstreamsErrors(t *testing.T) {
	const head = "upstreams:\n  - name: a\n"
	tests := []struct{ give, want string }{
		{head + "    provider: gemini\n    url: http://x\n", "u.yaml:3: upstreams[0].provider: bad provider \"gemini\""},
		{head + "    provider: azure\n    api: anthropic\n    url: http://x\n    api_key_env: K\n", "upstreams[0].provider: provider azure serves api openai, not anthropic"},
		{head + "    provider: azure\n    api_key_env: K\n", "upstreams[0].url: is required for provider azure"},
		{head + "    provider: azure\n    url: http://x\n", "upstreams[0].api_key_env: auth api-key needs api_key_env"},
		{head + "    provider: azure\n    url: http://x\n    auth: entra\n    api_key_env: K\n", "u.yaml:6: upstreams[0].api_key_env: auth entra takes its credentials from the cloud's own chain"},
		{head + "    provider: azure\n    url: http://x\n    auth: sigv4\n", "u.yaml:5: upstreams[0].auth: bad auth \"sigv4\": provider azure takes api-key or entra"},
		{head + "    provider: azure\n    url: http://x\n    api_key_env: K\n    api_version: latest\n", "u.yaml:6: upstreams[0].api_version: bad api_version \"latest\""},
		{head + "    provider: bedrock\n", "upstreams[0].region: is required for provider bedrock"},
		{head + "    provider: bedrock\n    region: US East\n", "u.yaml:4: upstreams[0].region: bad region \"US East\""},
		{head + "    provider: bedrock\n    region: us-east-1\n    auth: bearer\n", "upstreams[0].api_key_env: auth bearer needs api_key_env"},
		{head + "    provider: bedrock\n    region: us-east-1\n    project: p\n", "u.yaml:5: upstreams[0].project: project is for provider vertex only"},
		{head + "    provider: vertex\n    region: us-east5\n", "upstreams[0].project: is required for provider vertex"},
		{head + "    provider: vertex\n    region: us-east5\n    project: Bad_Project\n", "u.yaml:5: upstreams[0].project: bad project"},
		{head + "    provider: vertex\n    region: us-east5\n    project: p\n    auth: bearer\n", "u.yaml:6: upstreams[0].auth: bad auth \"bearer\": provider vertex takes google"},
		{head + "    url: http://x\n    region: us-east-1\n", "u.yaml:4: upstreams[0].region: region is for provider bedrock or vertex only"},
		{head + "    url: http://x\n    api_version: \"2024-10-21\"\n", "upstreams[0].api_version: api_version is for provider azure only"},
		{head + "    provider: anthropic\n    url: http://x\n", "upstreams[0].provider: provider anthropic serves api anthropic, not openai"},
		{head + "    provider: bedrock\n    region: us-east-1\n    aliases: {\"[x\": y}\n", "upstreams[0].aliases.[x: bad glob"},
		{head + "    provider: bedrock\n    region: us-east-1\n    aliases: {\"x*\": 3}\n", "upstreams[0].aliases.x*: want the provider's model id as a string"},
		{head + "    url: http://x\n    headers: {X-Amz-Security-Token: t}\n", "credentials go in api_key_env, never in the file"},
	}
	for _, tt := range tests {
		_, err := ParseUpstreams("u.yaml", []byte(tt.give), fakeEnv(map[string]string{"K": "k"}))
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%q: error %v; want one containing %q", tt.give, err, tt.want)
		}
	}
}
