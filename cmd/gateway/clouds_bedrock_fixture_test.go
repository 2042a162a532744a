package main

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// The AWS credentials the gateways' default chain reads from their
// environment; the scan at the end looks for the secret parts.
const (
	bedrockSessionToken = "IQoJb3JpZ2luX2VjEFakeSessionTokenForCorralTests=="
	bedrockProfile      = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
)

// bedrockSetup is three gateways on one real redis-server in front of
// fake Bedrock runtimes: a (priority 0) and b (priority 1) serve Claude
// Sonnet 4.5 through the inference profile; c serves Claude Opus but
// knows another secret, so it refuses every signature.
type bedrockSetup struct {
	bases   []string
	a, b, c *bedrocktest.Server
	rs      *redistest.Server
	logs    *logtest.Buffer
	hold    chan struct{} // releases a's stream of the prompt "live followers"
}

// startBedrock sets the AWS environment (so not parallel) and wires the
// gateways. a answers "please throttle" streams with a throttling
// exception before any event, "not valid" with Bedrock's
// ValidationException, and holds the stream of "live followers" after
// its first delta until hold is closed.
func startBedrock(t *testing.T) *bedrockSetup {
	dir := t.TempDir()
	awsEnv(t, bedrockSessionToken)

	s := &bedrockSetup{rs: redistest.Start(t), logs: &logtest.Buffer{}, hold: make(chan struct{})}
	s.a = bedrocktest.New(t, bedrocktest.Options{SessionToken: bedrockSessionToken, Models: []string{bedrockProfile},
		Reply: func(c bedrocktest.Call) bedrocktest.Reply {
			switch text := string(c.Body); {
			case strings.Contains(text, "please throttle"):
				return bedrocktest.Reply{Exception: "throttlingException"}
			case strings.Contains(text, "break midway"):
				return bedrocktest.Reply{Exception: "modelStreamErrorException", ExceptionAfter: 3}
			case strings.Contains(text, "not valid"):
				return bedrocktest.Reply{Status: 400, Error: "ValidationException", Message: "messages: text content blocks must be non-empty"}
			case strings.Contains(text, "live followers"):
				return bedrocktest.Reply{Hold: s.hold}
			}
			return bedrocktest.Reply{}
		}})
	s.b = bedrocktest.New(t, bedrocktest.Options{SessionToken: bedrockSessionToken, Models: []string{bedrockProfile},
		Reply: func(bedrocktest.Call) bedrocktest.Reply { return bedrocktest.Reply{Text: "answered by b"} }})
	s.c = bedrocktest.New(t, bedrocktest.Options{SessionToken: bedrockSessionToken, SecretAccessKey: "the-secret-c-knows"})
	up := func(name, url, glob, id, priority string) string {
		return "  - name: " + name + "\n    api: anthropic\n    provider: bedrock\n    url: " + url + "\n    region: us-east-1\n" +
			"    aliases: {\"" + glob + "\": \"" + id + "\"}\n    priority: " + priority + "\n"
	}
	upstreams := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+
		up("bedrock-a", s.a.URL, "claude-sonnet-4-5*", bedrockProfile, "0")+
		up("bedrock-b", s.b.URL, "claude-sonnet-4-5*", bedrockProfile, "1")+
		up("bedrock-c", s.c.URL, "claude-opus-4-1*", "us.anthropic.claude-opus-4-1-20250805-v1:0", "0"))
	env := []string{
		"CORRAL_REDIS_URL=" + s.rs.URL(),
		"CORRAL_TENANTS_FILE=" + writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-acme"))),
		"CORRAL_UPSTREAMS_FILE=" + upstreams,
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_DATA_DIR=" + filepath.Join(dir, "data"),
	}
	log := slog.New(slog.NewJSONHandler(s.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for range 3 {
		s.bases = append(s.bases, serveGateway(t, wireGateway(t, gatewayOptions{Logger: log}, env...)).URL)
	}
	return s
}

// bedrockClaude is anthropic-sdk-go pointed at Corral's instance base.
func bedrockClaude(base string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-acme"), aoption.WithMaxRetries(0))
	return &c
}

func bedrockParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// bedrockPost sends body to base's /v1/messages as acme with hdr and
// returns the status, headers and whole body.
func bedrockPost(t *testing.T, base, body string, hdr http.Header) (int, http.Header, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages", strings.NewReader(body))
	for k, vv := range hdr {
		req.Header[k] = vv
	}
	req.Header.Set("X-Api-Key", "sk-acme")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("POST /v1/messages: %v", err)
		return 0, nil, ""
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Errorf("read: %v", err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

// bedrockStream is what a client read of a streamed answer: its
// X-Corral-Cache, the text of its deltas, whether message_stop came.
type bedrockStream struct {
	cache, text string
	stopped     bool
}

// bedrockLiveStream reads a streamed Messages answer for text from base as
// acme, calling first when its first text delta arrives. It returns the
// status, the X-Corral-Cache, the text of the deltas and whether
// message_stop came.
func bedrockLiveStream(ctx context.Context, base, text string, first func()) (int, bedrockStream) {
	var r bedrockStream
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/messages",
		strings.NewReader(`{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"`+text+`"}]}`))
	req.Header.Set("X-Api-Key", "sk-acme")
	req.Header.Set("Anthropic-Version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		first()
		return 0, r
	}
	defer resp.Body.Close()
	r.cache = resp.Header.Get("X-Corral-Cache")
	sc := bufio.NewScanner(resp.Body)
	called := false
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		switch gjson.Get(data, "type").String() {
		case "content_block_delta":
			r.text += gjson.Get(data, "delta.text").String()
			if !called {
				called = true
				first()
			}
		case "message_stop":
			r.stopped = true
		}
	}
	if !called {
		first()
	}
	return resp.StatusCode, r
}

// bedrockLastData is the data of body's last SSE event.
func bedrockLastData(body string) string {
	lines := strings.Split(strings.TrimSpace(body), "\n")
	return strings.TrimPrefix(lines[len(lines)-1], "data: ")
}
