package main

import (
	"bytes"
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
	"github.com/corralhq/corral/internal/provider/vertex/vertextest"
	"github.com/corralhq/corral/internal/tenant"
)

// A gateway exporting traces while it signs Bedrock calls with an AWS
// session's credentials and sends Vertex AI calls with tokens from a
// service account's key exports none of them: no secret key, session
// token, private key, JWT assertion or access token in any span,
// attribute or resource. The attempts' spans name the clouds by the
// GenAI provider names.
func TestNoCloudCredentialsInTraces(t *testing.T) {
	dir := t.TempDir()
	const session = "IQoJb3JpZ2luX2VjTracedSessionTokenForCorral=="
	awsEnv(t, session)
	vx := vertextest.New(t, vertextest.Options{})
	googleEnv(t, vx.CredentialsFile)
	br := bedrocktest.New(t, bedrocktest.Options{SessionToken: session, Reply: func(c bedrocktest.Call) bedrocktest.Reply {
		if strings.Contains(string(c.Body), "to vertex") {
			return bedrocktest.Reply{Status: http.StatusServiceUnavailable, Error: "ServiceUnavailableException", Message: "Bedrock is unavailable."}
		}
		return bedrocktest.Reply{}
	}})
	upstreams := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+
		"  - name: bedrock-us\n    api: anthropic\n    provider: bedrock\n    url: "+br.URL+"\n    region: us-east-1\n"+
		"    aliases: {\"claude-sonnet-4-5*\": \"us.anthropic.claude-sonnet-4-5-20250929-v1:0\"}\n"+
		"  - name: vertex-eu\n    api: anthropic\n    provider: vertex\n    url: "+vx.URL+"\n    project: test-project\n    region: us-east5\n"+
		"    aliases: {\"claude-sonnet-4-5*\": \"claude-sonnet-4-5@20250929\"}\n    priority: 1\n")
	recv, got := otlpReceiver(t)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + filepath.Join(dir, "data"),
			"CORRAL_UPSTREAMS_FILE=" + upstreams,
			"CORRAL_TENANTS_FILE=" + writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-acme"))),
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL}, stdout, stderr)
	}()
	base := "http://" + stderr.waitFor(t, regexp.MustCompile(`"msg":"corral listening","addr":"([^"]+)"`))[1]
	hdr := http.Header{"Anthropic-Version": {"2023-06-01"}}
	for _, prompt := range []string{"to bedrock", "to vertex"} {
		body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"` + prompt + `"}]}`
		if status, h, b := bedrockPost(t, base, body, hdr); status != http.StatusOK {
			t.Fatalf("%s: %d %s %v", prompt, status, b, h)
		}
	}
	if br.Count() != 2 || vx.Calls() != 1 {
		t.Fatalf("calls: bedrock %d, vertex %d; want 2 and 1", br.Count(), vx.Calls())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	all, spans := drainSpans(t, got)
	providers := map[string]bool{}
	for _, sp := range spans {
		if p := attrMap(sp.GetAttributes())["gen_ai.provider.name"]; p != "" {
			providers[p] = true
		}
	}
	if !providers["aws.bedrock"] || !providers["gcp.vertex_ai"] {
		t.Errorf("attempt spans name providers %v; want aws.bedrock and gcp.vertex_ai", providers)
	}
	secrets := map[string]string{
		"AWS secret key":     bedrocktest.DefaultSecretAccessKey,
		"AWS session token":  session,
		"Google private key": vx.PrivateKeyPEM()[40:120],
	}
	for i, tok := range vx.Tokens() {
		secrets["Google access token "+string(rune('a'+i))] = tok
	}
	for i, a := range vx.Assertions() {
		secrets["JWT assertion "+string(rune('a'+i))] = a
	}
	if len(vx.Tokens()) == 0 || len(vx.Assertions()) == 0 {
		t.Fatal("the fake issued no token: nothing was scanned for")
	}
	for what, s := range secrets {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("the %s is in an exported span", what)
		}
	}
}
