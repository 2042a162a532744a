package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
)

// TestBedrockCluster runs Claude on Bedrock through three gateways on one
// redis-server, read by anthropic-sdk-go: plain and streamed answers,
// the client's bytes arriving as sent, one upstream call for 30
// identical requests and for 20 identical streams (followers on other
// instances reading it live), failover on a throttling exception before
// the first event, an exception after it as Anthropic's error event
// ending the stream (nothing stored), Bedrock's validation error as
// Anthropic's 400, a refused signature as 502; and no AWS secret or
// session token in any log line, answer, metric or Redis entry.
func TestBedrockCluster(t *testing.T) {
	s := startBedrock(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var answers []string // every body a client got, for the scan

	t.Run("messages", func(t *testing.T) {
		var raw *http.Response
		m, err := bedrockClaude(s.bases[0]).Messages.New(ctx, bedrockParams("hello from the sdk"), aoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if m.Content[0].Text != "bedrock reply to: hello from the sdk" || m.Model != "claude-sonnet-4-5-20250929" ||
			raw.Header.Get("X-Corral-Upstream") != "bedrock-a" || raw.Header.Get("X-Corral-Cache") != "MISS" {
			t.Errorf("answer %s, upstream %q, cache %q", m.RawJSON(), raw.Header.Get("X-Corral-Upstream"), raw.Header.Get("X-Corral-Cache"))
		}
		answers = append(answers, m.RawJSON())
		stream := bedrockClaude(s.bases[1]).Messages.NewStreaming(ctx, bedrockParams("stream from the sdk"))
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
		again, err := bedrockClaude(s.bases[2]).Messages.New(ctx, bedrockParams("stream from the sdk"), aoption.WithResponseInto(&hit))
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
		code, _, body := bedrockPost(t, s.bases[0], `{"model":"claude-sonnet-4-5","max_tokens":64,"x_unknown":1.50e+00,`+msgs+`,"stream":false}`,
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
			code, _, body := bedrockPost(t, s.bases[i%3], `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"thirty at once"}]}`, nil)
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
		results := make([]bedrockStream, 20)
		done := startBurst(20, func(i int) int {
			code, r := bedrockLiveStream(ctx, s.bases[i%3], "live followers", func() { firstDelta <- i })
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
		code, h, body := bedrockPost(t, s.bases[1], `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"please throttle"}]}`, nil)
		answers = append(answers, body)
		if code != 200 || h.Get("X-Corral-Upstream") != "bedrock-b" || !strings.Contains(body, `"text":"answered "`) || !strings.HasSuffix(body, "event: message_stop\ndata: "+bedrockLastData(body)+"\n\n") {
			t.Errorf("%d from %q: %s", code, h.Get("X-Corral-Upstream"), body)
		}
		if s.a.Count()-beforeA != 1 || s.b.Count()-beforeB != 1 {
			t.Errorf("calls a %d, b %d; want 1 each", s.a.Count()-beforeA, s.b.Count()-beforeB)
		}
	})

	t.Run("exception mid-stream ends with Anthropic's error event", func(t *testing.T) {
		code, h, body := bedrockPost(t, s.bases[0], `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"break midway"}]}`, nil)
		answers = append(answers, body)
		const end = "event: content_block_delta\ndata: {\"delta\":{\"text\":\"bedrock \",\"type\":\"text_delta\"},\"index\":0,\"type\":\"content_block_delta\"}\n\n" +
			"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"The model stream was interrupted.\"}}\n\n"
		if code != 200 || !strings.HasSuffix(body, end) || strings.Count(body, "event: ") != 4 || strings.Contains(h.Get("Cache-Status"), "stored") {
			t.Errorf("%d (%s):\n%s", code, h.Get("Cache-Status"), body)
		}
	})

	t.Run("validation error is Anthropic's 400", func(t *testing.T) {
		_, err := bedrockClaude(s.bases[2]).Messages.New(ctx, bedrockParams("not valid"))
		var aerr *anthropic.Error
		if !errors.As(err, &aerr) || aerr.StatusCode != 400 ||
			aerr.RawJSON() != `{"type":"error","error":{"type":"invalid_request_error","message":"messages: text content blocks must be non-empty"}}` {
			t.Fatalf("err = %v", err)
		}
		answers = append(answers, aerr.RawJSON())
	})

	t.Run("refused signature is 502", func(t *testing.T) {
		code, _, body := bedrockPost(t, s.bases[0], `{"model":"claude-opus-4-1","max_tokens":64,"messages":[{"role":"user","content":"refused"}]}`, nil)
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
		places["redis"] = s.rs.Dump()
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
