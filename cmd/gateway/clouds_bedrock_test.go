package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
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
	t.Setenv("AWS_ACCESS_KEY_ID", bedrocktest.DefaultAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bedrocktest.DefaultSecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", bedrockSessionToken)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", writeFile(t, filepath.Join(dir, "aws-config"), ""))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", writeFile(t, filepath.Join(dir, "aws-credentials"), ""))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")

	s := &bedrockSetup{rs: redistest.Start(t), logs: &logtest.Buffer{}, hold: make(chan struct{})}
	s.a = bedrocktest.New(t, bedrocktest.Options{SessionToken: bedrockSessionToken, Models: []string{bedrockProfile},
		Reply: func(c bedrocktest.Call) bedrocktest.Reply {
			switch text := string(c.Body); {
			case strings.Contains(text, "please throttle"):
				return bedrocktest.Reply{Exception: "throttlingException"}
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

// claude is anthropic-sdk-go pointed at Corral's instance base.
func claude(base string) *anthropic.Client {
	c := anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey("sk-acme"), aoption.WithMaxRetries(0))
	return &c
}

func claudeParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 64,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// postMessages sends body to base's /v1/messages as acme with hdr and
// returns the status, headers and whole body.
func postMessages(t *testing.T, base, body string, hdr http.Header) (int, http.Header, string) {
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

// TestBedrockCluster runs Claude on Bedrock through three gateways on one
// redis-server, read by anthropic-sdk-go: plain and streamed answers,
// the client's bytes arriving as sent, one upstream call for 30
// identical requests and for 20 identical streams (followers on other
// instances reading it live), failover on a throttling exception before
// the first event, Bedrock's validation error as Anthropic's 400, a
// refused signature as 502; and no AWS secret or session token in any
// log line, answer, metric or Redis entry.
func TestBedrockCluster(t *testing.T) {
	s := startBedrock(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var answers []string // every body a client got, for the scan

	t.Run("messages", func(t *testing.T) {
		var raw *http.Response
		m, err := claude(s.bases[0]).Messages.New(ctx, claudeParams("hello from the sdk"), aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if m.Content[0].Text != "bedrock reply to: hello from the sdk" || m.Model != "claude-sonnet-4-5-20250929" ||
			raw.Header.Get("X-Corral-Upstream") != "bedrock-a" || raw.Header.Get("X-Corral-Cache") != "MISS" {
			t.Errorf("answer %s, upstream %q, cache %q", m.RawJSON(), raw.Header.Get("X-Corral-Upstream"), raw.Header.Get("X-Corral-Cache"))
		}
		answers = append(answers, m.RawJSON())
		stream := claude(s.bases[1]).Messages.NewStreaming(ctx, claudeParams("stream from the sdk"))
		var acc anthropic.Message
		for stream.Next() {
			if err := acc.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if acc.Content[0].Text != "bedrock reply to: stream from the sdk" || acc.StopReason != "end_turn" || acc.Model != "claude-sonnet-4-5-20250929" {
			t.Errorf("streamed message = %+v", acc)
		}
		// The stream's answer is the one entry a plain request then hits,
		// on another instance.
		var hit *http.Response
		again, err := claude(s.bases[2]).Messages.New(ctx, claudeParams("stream from the sdk"), aoption.WithResponseInto(&hit))
		if err != nil || again.Content[0].Text != acc.Content[0].Text || hit.Header.Get("X-Corral-Cache") != "HIT" {
			t.Errorf("after the stream: %v %s (%s)", err, again.RawJSON(), hit.Header.Get("X-Corral-Cache"))
		}
		if n := s.a.Count(); n != 2 {
			t.Errorf("bedrock-a calls = %d; want 2", n)
		}
	})

	t.Run("bytes arrive as sent", func(t *testing.T) {
		before := s.a.Count()
		const msgs = `"messages":[{"role":"user","content":[{"type":"text","text":"bytes as sent","cache_control":{"type":"ephemeral","ttl":"1h"}}]}]`
		code, _, body := postMessages(t, s.bases[0], `{"model":"claude-sonnet-4-5","max_tokens":64,"x_unknown":1.50e+00,`+msgs+`,"stream":false}`,
			http.Header{"Anthropic-Version": {"2023-06-01"}, "Anthropic-Beta": {"extended-cache-ttl-2025-04-11"}})
		answers = append(answers, body)
		if code != 200 || s.a.Count() != before+1 {
			t.Fatalf("%d %s (%d calls)", code, body, s.a.Count()-before)
		}
		call := s.a.Calls()[before]
		want := `{"max_tokens":64,"x_unknown":1.50e+00,` + msgs + `,"anthropic_version":"2023-06-01","anthropic_beta":["extended-cache-ttl-2025-04-11"]}`
		if string(call.Body) != want {
			t.Errorf("body at Bedrock =\n%s\nwant\n%s", call.Body, want)
		}
		if call.Path != "/model/"+bedrockProfile+"/invoke" || call.Header.Get("Anthropic-Version") != "" || call.Header.Get("Anthropic-Beta") != "" ||
			call.Header.Get("X-Api-Key") != "" || !strings.HasPrefix(call.Header.Get("Authorization"), "AWS4-HMAC-SHA256 Credential="+bedrocktest.DefaultAccessKeyID+"/") {
			t.Errorf("call = %s %v", call.Path, call.Header)
		}
	})

	t.Run("30 identical requests, 1 call", func(t *testing.T) {
		before := s.a.Count()
		bodies := make([]string, 30)
		codes := startBurst(30, func(i int) int {
			code, _, body := postMessages(t, s.bases[i%3], `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"thirty at once"}]}`, nil)
			bodies[i] = body
			return code
		})()
		for i, code := range codes {
			if code != 200 || gjson.Get(bodies[i], "content.0.text").String() != "bedrock reply to: thirty at once" {
				t.Errorf("request %d: %d %s", i, code, bodies[i])
			}
		}
		if n := s.a.Count() - before; n != 1 {
			t.Errorf("bedrock-a calls = %d; want 1", n)
		}
	})

	t.Run("20 identical streams, 1 call, live followers", func(t *testing.T) {
		before := s.a.Count()
		firstDelta := make(chan int, 20)
		type result struct {
			cache, text string
			stopped     bool
		}
		results := make([]result, 20)
		done := startBurst(20, func(i int) int {
			code, r := liveStream(ctx, s.bases[i%3], "live followers", func() { firstDelta <- i })
			results[i] = r
			return code
		})
		for range 20 {
			select {
			case <-firstDelta:
			case <-ctx.Done():
				t.Fatal("not every stream got its first delta while Bedrock held the rest: followers are not live")
			}
		}
		close(s.hold) // every stream has text while Bedrock has not finished
		codes := done()
		caches := map[string]int{}
		for i, r := range results {
			caches[r.cache]++
			if codes[i] != 200 || r.text != "bedrock reply to: live followers" || !r.stopped {
				t.Errorf("stream %d: %d %+v", i, codes[i], r)
			}
		}
		if n := s.a.Count() - before; n != 1 || caches["MISS"] != 1 || caches["COALESCED"] != 19 {
			t.Errorf("bedrock-a calls = %d (want 1); X-Corral-Cache %v", n, caches)
		}
	})

	t.Run("throttled before the first event fails over", func(t *testing.T) {
		beforeA, beforeB := s.a.Count(), s.b.Count()
		code, h, body := postMessages(t, s.bases[1], `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"please throttle"}]}`, nil)
		answers = append(answers, body)
		if code != 200 || h.Get("X-Corral-Upstream") != "bedrock-b" || !strings.Contains(body, `"text":"answered "`) || !strings.HasSuffix(body, "event: message_stop\ndata: "+gjsonLast(body)+"\n\n") {
			t.Errorf("%d from %q: %s", code, h.Get("X-Corral-Upstream"), body)
		}
		if s.a.Count()-beforeA != 1 || s.b.Count()-beforeB != 1 {
			t.Errorf("calls a %d, b %d; want 1 each", s.a.Count()-beforeA, s.b.Count()-beforeB)
		}
	})

	t.Run("validation error is Anthropic's 400", func(t *testing.T) {
		_, err := claude(s.bases[2]).Messages.New(ctx, claudeParams("not valid"))
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != 400 ||
			aerr.RawJSON() != `{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}` {
			t.Fatalf("err = %v", err)
		}
		answers = append(answers, aerr.RawJSON())
	})

	t.Run("refused signature is 502", func(t *testing.T) {
		code, _, body := postMessages(t, s.bases[0], `{"model":"claude-opus-4-1","max_tokens":64,"messages":[{"role":"user","content":"refused"}]}`, nil)
		answers = append(answers, body)
		if code != 502 || gjson.Get(body, "error.type").String() != "api_error" || s.c.Count() != 1 {
			t.Errorf("%d %s (%d calls to c)", code, body, s.c.Count())
		}
	})

	t.Run("no secret anywhere", func(t *testing.T) {
		secrets := []string{bedrocktest.DefaultSecretAccessKey, bedrockSessionToken}
		places := map[string]string{"log": s.logs.String(), "answers": strings.Join(answers, "\n")}
		for i, base := range s.bases {
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/metrics", nil)
			req.Header.Set("Authorization", "Bearer adm")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(b), "bedrock-a") {
				t.Errorf("instance %d /metrics: %d", i, resp.StatusCode)
			}
			places["metrics"] += string(b)
		}
		places["redis"] = redisDump(t, ctx, s.rs)
		if !strings.Contains(places["redis"], "bedrock reply to: thirty at once") {
			t.Errorf("the Redis dump holds no stored answer; the scan would prove nothing")
		}
		if !strings.Contains(places["log"], `"name":"bedrock-a"`) || !strings.Contains(places["log"], `"code":"upstream_auth_error"`) {
			t.Errorf("the log has neither the upstreams nor the refused call; the scan would prove nothing:\n%s", places["log"])
		}
		for where, text := range places {
			for _, secret := range secrets {
				if strings.Contains(text, secret) {
					t.Errorf("a secret (%.6s...) is in the %s", secret, where)
				}
			}
		}
	})
}

// liveStream reads a streamed Messages answer for text from base as
// acme, calling first when its first text delta arrives. It returns the
// status, the X-Corral-Cache, the text of the deltas and whether
// message_stop came.
func liveStream(ctx context.Context, base, text string, first func()) (int, struct {
	cache, text string
	stopped     bool
}) {
	var r struct {
		cache, text string
		stopped     bool
	}
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

// gjsonLast is the data of body's last SSE event.
func gjsonLast(body string) string {
	lines := strings.Split(strings.TrimSpace(body), "\n")
	return strings.TrimPrefix(lines[len(lines)-1], "data: ")
}

// redisDump is every key and value in rs, as text.
func redisDump(t *testing.T, ctx context.Context, rs *redistest.Server) string {
	t.Helper()
	c := rs.Client()
	var b strings.Builder
	iter := c.Scan(ctx, 0, "*", 100).Iterator()
	for iter.Next(ctx) {
		k := iter.Val()
		b.WriteString(k + "\n")
		var v any
		var err error
		switch typ, _ := c.Type(ctx, k).Result(); typ {
		case "string":
			v, err = c.Get(ctx, k).Result()
		case "hash":
			v, err = c.HGetAll(ctx, k).Result()
		case "list":
			v, err = c.LRange(ctx, k, 0, -1).Result()
		case "set":
			v, err = c.SMembers(ctx, k).Result()
		case "zset":
			v, err = c.ZRangeWithScores(ctx, k, 0, -1).Result()
		case "stream":
			v, err = c.XRange(ctx, k, "-", "+").Result()
		}
		if err != nil {
			t.Fatalf("redis %s: %v", k, err)
		}
		b.WriteString(strings.ReplaceAll(strings.TrimSpace(fmt.Sprint(v)), "\n", " ") + "\n")
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
