package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/provider/vertex/vertextest"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// vertexCluster is three gateways on one redis-server in front of a fake
// Vertex AI: upstream vertex-claude (api anthropic) and vertex-gemini (api
// openai), Google credentials from the fake's service-account key file.
type vertexCluster struct {
	fake  *vertextest.Server
	redis *redistest.Server
	bases []string
	logs  interface{ String() string } // everything the gateways logged
}

// startVertexCluster wires the cluster.
func startVertexCluster(t *testing.T, opts vertextest.Options) *vertexCluster {
	t.Helper()
	fake := vertextest.New(t, opts)
	logs := &logtest.Buffer{}
	c := &vertexCluster{logs: logs}
	wireVertex(t, c, fake, fake.CredentialsFile, 3, logs)
	return c
}

// wireVertex wires n gateways in front of fake into c, logging to logs,
// with Google's key file at creds. Google's credential chain reads the
// process environment, so the test sets it (and is not parallel): the key
// file, and nothing else of Google's that would be consulted.
func wireVertex(t *testing.T, c *vertexCluster, fake *vertextest.Server, creds string, n int, logs io.Writer) {
	t.Helper()
	googleEnv(t, creds)
	rdb := redistest.Start(t)
	dir := t.TempDir()
	upstreams := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+
		"  - name: vertex-claude\n    api: anthropic\n    provider: vertex\n    url: "+fake.URL+"\n"+
		"    project: test-project\n    region: us-east5\n    aliases: {\"claude-sonnet-4-5*\": \"claude-sonnet-4-5@20250929\"}\n"+
		"  - name: vertex-gemini\n    api: openai\n    provider: vertex\n    url: "+fake.URL+"\n"+
		"    project: test-project\n    region: us-east5\n    aliases: {\"gemini-2.0-flash\": \"google/gemini-2.0-flash-001\"}\n")
	env := []string{
		"CORRAL_UPSTREAMS_FILE=" + upstreams,
		"CORRAL_TENANTS_FILE=" + writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-vertex"))),
		"CORRAL_REDIS_URL=" + rdb.URL(),
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_DATA_DIR=" + filepath.Join(dir, "data"),
	}
	c.fake, c.redis = fake, rdb
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	for range n {
		// CheckUpstream: the start-up credential check runs (and is scanned).
		gw := wireGateway(t, gatewayOptions{Logger: log, CheckUpstream: true}, env...)
		c.bases = append(c.bases, serveGateway(t, gw).URL)
	}
}

func vertexClaude(base string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-vertex"), aoption.WithMaxRetries(0))
	return &c
}

func vertexClaudeParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// TestVertexThroughCorral: Claude on Vertex and Vertex's OpenAI-compatible
// endpoint through three Corral instances, read by the official SDKs;
// bodies arrive byte for byte; a burst over the instances is one call; no
// credential reaches a log, an answer, /metrics or Redis.
func TestVertexThroughCorral(t *testing.T) {
	var arrived chan struct{}
	gate := make(chan struct{})
	close(gate)        // open unless a subtest holds calls
	var gmu sync.Mutex // guards gate and arrived
	c := startVertexCluster(t, vertextest.Options{Before: func(vertextest.Request) {
		gmu.Lock()
		g, a := gate, arrived
		gmu.Unlock()
		if a != nil {
			a <- struct{}{}
		}
		<-g
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	base := "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929"
	last := func() vertextest.Request { r := c.fake.Requests(); return r[len(r)-1] }
	var seen []string // raw answers, scanned for credentials at the end

	t.Run("rawPredict read by anthropic-sdk-go", func(t *testing.T) {
		var resp *http.Response
		msg, err := vertexClaude(c.bases[0]).Messages.New(ctx, vertexClaudeParams("non-stream"), aoption.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if msg.Content[0].Text != "Vertex heard: non-stream" || msg.Model != "claude-sonnet-4-5-20250929" {
			t.Errorf("message %q from %q", msg.Content[0].Text, msg.Model)
		}
		if by := resp.Header.Get("X-Corral-Upstream"); by != "vertex-claude" {
			t.Errorf("X-Corral-Upstream = %q", by)
		}
		if p := last().Path; p != base+":rawPredict" {
			t.Errorf("Vertex saw %s", p)
		}
	})

	t.Run("streamRawPredict read by anthropic-sdk-go", func(t *testing.T) {
		stream := vertexClaude(c.bases[1]).Messages.NewStreaming(ctx, vertexClaudeParams("a stream"))
		var acc anthropic.Message
		events := 0
		for stream.Next() {
			events++
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Content[0].Text != "Vertex heard: a stream" || acc.Model != "claude-sonnet-4-5-20250929" || events < 6 {
			t.Errorf("streamed %q from %q in %d events", acc.Content[0].Text, acc.Model, events)
		}
		if p := last().Path; p != base+":streamRawPredict" {
			t.Errorf("Vertex saw %s", p)
		}
	})

	t.Run("count_tokens", func(t *testing.T) {
		n, err := vertexClaude(c.bases[2]).Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count me"))}})
		if err != nil {
			t.Fatal(err)
		}
		r := last()
		if r.Path != "/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/count-tokens:rawPredict" ||
			!strings.Contains(string(r.Body), `"model":"claude-sonnet-4-5@20250929"`) || n.InputTokens <= 0 {
			t.Errorf("count_tokens: %s %s → %d", r.Path, r.Body, n.InputTokens)
		}
	})

	t.Run("OpenAI-compatible endpoint read by openai-go", func(t *testing.T) {
		oc := openai.NewClient(option.WithBaseURL(c.bases[0]+"/v1"), option.WithAPIKey("sk-vertex"), option.WithMaxRetries(0))
		params := openai.ChatCompletionNewParams{Model: "gemini-2.0-flash", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("bonjour")}}
		cc, err := oc.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if cc.Choices[0].Message.Content != "Vertex heard: bonjour" || cc.Model != "google/gemini-2.0-flash-001" {
			t.Errorf("chat %q from %q", cc.Choices[0].Message.Content, cc.Model)
		}
		r := last()
		if r.Path != "/v1/projects/test-project/locations/us-east5/endpoints/openapi/chat/completions" ||
			!strings.Contains(string(r.Body), `"model":"google/gemini-2.0-flash-001"`) {
			t.Errorf("Vertex saw %s %s", r.Path, r.Body)
		}
		params.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("streamed bonjour")}
		stream := oc.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for stream.Next() {
			acc.AddChunk(stream.Current())
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if got := acc.Choices[0].Message.Content; got != "Vertex heard: streamed bonjour" {
			t.Errorf("streamed chat %q", got)
		}
	})

	t.Run("bodies arrive byte for byte", func(t *testing.T) {
		msgs := `"x_odd":1.50e+00,"messages":[{"role":"user","content":[{"type":"text","text":"bytes","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]`
		code, _, body := postAs(t, c.bases[1], "/v1/messages", "sk-vertex", `{"model":"claude-sonnet-4-5","max_tokens":64,`+msgs+`}`)
		seen = append(seen, body)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if got, want := string(last().Body), `{"max_tokens":64,`+msgs+`,"anthropic_version":"vertex-2023-10-16"}`; got != want {
			t.Errorf("Vertex got\n %s\nwant\n %s", got, want)
		}
		code, _, body = postAs(t, c.bases[2], "/v1/chat/completions", "sk-vertex", `{"model":"gemini-2.0-flash",`+msgs+`}`)
		seen = append(seen, body)
		if code != 200 {
			t.Fatalf("%d %s", code, body)
		}
		if got, want := string(last().Body), `{"model":"google/gemini-2.0-flash-001",`+msgs+`}`; got != want {
			t.Errorf("Vertex got\n %s\nwant\n %s", got, want)
		}
	})

	t.Run("30 identical requests over 3 instances make 1 call", func(t *testing.T) {
		gmu.Lock()
		gate, arrived = make(chan struct{}), make(chan struct{}, 64)
		hold := gate
		gmu.Unlock()
		before := c.fake.Calls()
		const n = 30
		codes := startBurst(n, func(i int) int {
			code, _, _ := postAs(t, c.bases[i%3], "/v1/messages", "sk-vertex", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"burst"}]}`)
			return code
		})
		select { // the leader's call is at Vertex; every other request waits on it or finds its answer
		case <-arrived:
		case <-ctx.Done():
			t.Error("no call reached Vertex")
		}
		close(hold)
		for i, code := range codes() {
			if code != 200 {
				t.Errorf("request %d: %d", i, code)
			}
		}
		if got := c.fake.Calls() - before; got != 1 {
			t.Errorf("Vertex calls = %d for %d identical requests over 3 instances; want 1", got, n)
		}
	})

	c.assertNoSecrets(t, seen...)
}

// TestVertexTokenRefresh: with access tokens that live 2 s, requests
// spread over several lifetimes on three instances all succeed: each
// instance replaces its token before it lapses, Vertex never sees an
// expired one.
func TestVertexTokenRefresh(t *testing.T) {
	c := startVertexCluster(t, vertextest.Options{TokenLifetime: 2 * time.Second})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const span = 7 * time.Second // three and a half lifetimes
	end := time.Now().Add(span)
	var wg sync.WaitGroup
	var mu sync.Mutex // guards failed, sent
	var failed []string
	sent := 0
	for w := range 3 {
		wg.Go(func() {
			tick := time.NewTicker(50 * time.Millisecond) // pacing, not synchronisation
			defer tick.Stop()
			for i := 0; time.Now().Before(end); i++ {
				select {
				case <-tick.C:
				case <-ctx.Done():
					return
				}
				_, err := vertexClaude(c.bases[w]).Messages.New(ctx, vertexClaudeParams(fmt.Sprintf("worker %d request %d", w, i)))
				mu.Lock()
				sent++
				if err != nil {
					failed = append(failed, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d requests failed across token refreshes; first: %s", len(failed), sent, failed[0])
	}
	refused := 0
	for _, r := range c.fake.Requests() {
		if r.Status == http.StatusUnauthorized {
			refused++
		}
	}
	t.Logf("%d requests, %d token grants", sent, c.fake.Grants())
	defer c.assertNoSecrets(t, failed...)
	if g := c.fake.Grants(); g < 2*3 || refused != 0 || c.fake.Calls() != sent {
		t.Errorf("%d token grants, %d calls refused, %d calls for %d requests; want ≥ 6 grants (each instance refreshed), none refused, one call each",
			g, refused, c.fake.Calls(), sent)
	}
}

// assertNoSecrets looks for the service account's private key, every
// assertion signed with it and every access token issued in the logs,
// the answers and errors clients saw, every instance's /metrics, and every
// Redis key and value.
func (c *vertexCluster) assertNoSecrets(t *testing.T, answers ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var secrets []string
	for line := range strings.Lines(c.fake.PrivateKeyPEM()) {
		if line = strings.TrimSpace(line); len(line) > 20 && !strings.HasPrefix(line, "-----") {
			secrets = append(secrets, line)
		}
	}
	secrets = append(append(secrets, c.fake.Assertions()...), c.fake.Tokens()...)
	if len(c.fake.Tokens()) == 0 || len(c.fake.Assertions()) == 0 {
		t.Fatal("no token was issued: nothing to look for")
	}
	places := map[string]string{"the gateway log": c.logs.String(), "an answer or error a client saw": strings.Join(answers, "\n")}
	for i, b := range c.bases {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, b+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		places[fmt.Sprintf("/metrics of instance %d", i)] = string(m)
	}
	places["Redis"] = c.redis.Dump()
	if !strings.Contains(places["Redis"], "corral:v1:") {
		t.Fatal("Redis holds none of Corral's keys: nothing was scanned")
	}
	for where, text := range places {
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("a credential (%.12s…) is in %s", s, where)
			}
		}
	}
}
