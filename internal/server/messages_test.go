package server

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/corralhq/corral/internal/tenant"
)

func withAnthropic(o *harnessOptions) { o.anthropic = true }

// messagesCalls counts the upstream's Messages calls.
func messagesCalls(h *harness) int64 { return h.mock.Stats().Paths["/v1/messages"] }

func claudeClient(base, key string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL(base), aoption.WithAPIKey(key), aoption.WithMaxRetries(0))
}

func msgParams(text string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(text))}}
}

// postMessages sends a raw Messages request with the tenant key in
// x-api-key, as Anthropic's SDKs do.
func postMessages(ctx context.Context, url, key, body string, hdr ...string) answer {
	return sendWith(ctx, url, body, append([]string{"X-Api-Key", key}, hdr...)...)
}

func TestMessagesWithTheAnthropicSDK(t *testing.T) {
	h := newHarness(t, withAnthropic)
	c := claudeClient(h.gw.URL, acmeKey)
	ctx := context.Background()
	var raw *http.Response
	m1, err := c.Messages.New(ctx, msgParams("hello claude"), aoption.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Corral-Cache") != "MISS" || raw.Header.Get("X-Corral-Upstream") != "claude" {
		t.Fatalf("MISS: %v %v", err, raw.Header)
	}
	m2, err := c.Messages.New(ctx, msgParams("hello claude"), aoption.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Corral-Cache") != "HIT" || m2.ID != m1.ID || m2.Content[0].Text != "mock reply to: hello claude" {
		t.Fatalf("HIT: %v %s %+v", err, raw.Header.Get("X-Corral-Cache"), m2)
	}
	// A streaming client gets the stored message as events the SDK's
	// accumulator turns back into it.
	st := c.Messages.NewStreaming(ctx, msgParams("hello claude"), aoption.WithResponseInto(&raw))
	var acc anthropic.Message
	for st.Next() {
		if err := acc.Accumulate(st.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if st.Err() != nil || raw.Header.Get("X-Corral-Cache") != "HIT" || acc.ID != m1.ID || acc.Content[0].Text != m1.Content[0].Text || acc.Usage.OutputTokens != m1.Usage.OutputTokens {
		t.Fatalf("streamed HIT: %v %s %+v", st.Err(), raw.Header.Get("X-Corral-Cache"), acc)
	}
	// A streamed miss serves a later plain request.
	st = c.Messages.NewStreaming(ctx, msgParams("streamed first"))
	acc = anthropic.Message{}
	for st.Next() {
		_ = acc.Accumulate(st.Current())
	}
	m3, err := c.Messages.New(ctx, msgParams("streamed first"), aoption.WithResponseInto(&raw))
	if err != nil || raw.Header.Get("X-Corral-Cache") != "HIT" || m3.Content[0].Text != acc.Content[0].Text || m3.Usage.InputTokens != acc.Usage.InputTokens {
		t.Fatalf("stream then plain: %v %s %q %q", err, raw.Header.Get("X-Corral-Cache"), m3.Content[0].Text, acc.Content[0].Text)
	}
	if n := messagesCalls(h); n != 2 {
		t.Errorf("upstream Messages calls = %d; want 2 (one per prompt)", n)
	}
	// count_tokens is proxied.
	n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three"))}})
	if err != nil || n.InputTokens != 3 {
		t.Errorf("count_tokens: %+v %v", n, err)
	}
	// The model list in Anthropic's shape.
	page, err := c.Models.List(ctx, anthropic.ModelListParams{})
	if err != nil || len(page.Data) == 0 || page.Data[0].ID == "" {
		t.Errorf("models: %+v %v", page, err)
	}
}

func TestMessagesErrorsInAnthropicShape(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("rpm1", "sk-rpm1", 1, 0)}
	})
	ctx := context.Background()
	url := h.gw.URL + "/v1/messages"
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
	bad := postMessages(ctx, url, "sk-wrong", body)
	if bad.status != 401 || bad.body != `{"type":"error","error":{"type":"authentication_error","message":"Incorrect or missing API key. Send your Corral key as 'x-api-key: YOUR_KEY' or 'Authorization: Bearer YOUR_KEY'."}}` {
		t.Errorf("401: %d %s", bad.status, bad.body)
	}
	if a := postMessages(ctx, url, "sk-rpm1", body); a.status != 200 {
		t.Fatalf("first: %d %s", a.status, a.body)
	}
	lim := postMessages(ctx, url, "sk-rpm1", strings.Replace(body, `"x"`, `"y"`, 1))
	if lim.status != 429 || !strings.HasPrefix(lim.body, `{"type":"error","error":{"type":"rate_limit_error","message":`) ||
		lim.header.Get("Retry-After") == "" || lim.header.Get("anthropic-ratelimit-requests-limit") != "1" ||
		lim.header.Get("anthropic-ratelimit-requests-remaining") != "0" || lim.header.Get("x-ratelimit-limit-requests") != "" {
		t.Errorf("429: %d %v %s", lim.status, lim.header, lim.body)
	}
	if _, err := time.Parse(time.RFC3339, lim.header.Get("anthropic-ratelimit-requests-reset")); err != nil {
		t.Errorf("reset %q is not RFC 3339", lim.header.Get("anthropic-ratelimit-requests-reset"))
	}
	// The SDK reads it as its own 429.
	rc := claudeClient(h.gw.URL, "sk-rpm1")
	_, err := rc.Messages.New(ctx, msgParams("z"))
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 429 {
		t.Errorf("SDK on a 429: %v", err)
	}
	// A remembered unknown model, and Anthropic's 529 passed through but
	// never stored.
	nf := `{"model":"mock-404","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
	postMessages(ctx, url, acmeKey, nf)
	neg := postMessages(ctx, url, acmeKey, nf)
	if neg.status != 404 || neg.header.Get("X-Corral-Cache") != "NEGATIVE" || !strings.Contains(neg.body, `"not_found_error"`) {
		t.Errorf("negative: %d %s %s", neg.status, neg.header.Get("X-Corral-Cache"), neg.body)
	}
	before := messagesCalls(h)
	ov := `{"model":"mock-529","max_tokens":16,"messages":[{"role":"user","content":"x"}]}`
	for range 2 {
		if a := postMessages(ctx, url, acmeKey, ov); a.status != 529 || !strings.Contains(a.body, `"overloaded_error"`) || a.header.Get("X-Corral-Cache") == "NEGATIVE" {
			t.Errorf("529: %d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := messagesCalls(h) - before; n != 2 {
		t.Errorf("two 529s made %d upstream calls; want 2 (never stored)", n)
	}
	if a := postMessages(ctx, url, acmeKey, `not json`); a.status != 400 || !strings.Contains(a.body, `"invalid_request_error"`) || !strings.HasPrefix(a.body, `{"type":"error"`) {
		t.Errorf("bad JSON: %d %s", a.status, a.body)
	}
}

func TestMessagesForwardHeadersQueryAndOwnKey(t *testing.T) {
	seen := make(chan http.Header, 8)
	queries := make(chan string, 8)
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/messages" {
					seen <- r.Header.Clone()
					queries <- r.URL.RawQuery
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	ctx := context.Background()
	body := `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"headers"}]}`
	a := postMessages(ctx, h.gw.URL+"/v1/messages?beta=true", acmeKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "tools-2024-04-04")
	if a.status != 200 {
		t.Fatalf("%d %s", a.status, a.body)
	}
	hd, q := <-seen, <-queries
	if hd.Get("Anthropic-Version") != "2023-06-01" || hd.Get("Anthropic-Beta") != "tools-2024-04-04" || q != "beta=true" {
		t.Errorf("upstream got version %q beta %q query %q", hd.Get("Anthropic-Version"), hd.Get("Anthropic-Beta"), q)
	}
	if hd.Get("X-Api-Key") != anthropicUpstreamKey || hd.Get("Authorization") != "" {
		t.Errorf("upstream credentials: x-api-key %q authorization %q; want only Corral's own key", hd.Get("X-Api-Key"), hd.Get("Authorization"))
	}
	if strings.Contains(a.body, anthropicUpstreamKey) || strings.Contains(strings.Join(a.header.Values("X-Api-Key"), ""), anthropicUpstreamKey) {
		t.Error("the upstream key reached the client")
	}
	// The beta header and the query are part of the key.
	b := postMessages(ctx, h.gw.URL+"/v1/messages?beta=true", acmeKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "other-beta")
	c := postMessages(ctx, h.gw.URL+"/v1/messages", acmeKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "tools-2024-04-04")
	d := postMessages(ctx, h.gw.URL+"/v1/messages?beta=true", acmeKey, body, "anthropic-version", "2023-06-01", "anthropic-beta", "tools-2024-04-04")
	if b.header.Get("X-Corral-Cache") != "MISS" || c.header.Get("X-Corral-Cache") != "MISS" || d.header.Get("X-Corral-Cache") != "HIT" {
		t.Errorf("key scope: other beta %s, no query %s, same again %s", b.header.Get("X-Corral-Cache"), c.header.Get("X-Corral-Cache"), d.header.Get("X-Corral-Cache"))
	}
}

func TestMessagesCoalesceAndStreamAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 3, withAnthropic, func(o *harnessOptions) {
		o.mock.Latency, o.mock.StreamChunks, o.mock.ChunkDelay = 100*time.Millisecond, 8, 50*time.Millisecond
	})
	body := `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"thirty at once"}]}`
	run := func(n int, body string) []answer {
		var wg sync.WaitGroup
		out := make([]answer, n)
		start := make(chan struct{})
		for i := range out {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out[i] = postMessages(context.Background(), h.bases()[i%3]+"/v1/messages", acmeKey, body)
			}()
		}
		close(start)
		wg.Wait()
		return out
	}
	for i, a := range run(30, body) {
		if a.status != 200 {
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	if n := messagesCalls(h); n != 1 {
		t.Fatalf("30 identical over 3 instances: %d upstream calls; want 1", n)
	}
	// Twenty identical streams: one call; every follower's events are live
	// (its first event before the leader's last) and add up to the same text.
	type timed struct {
		a           answer
		first, last time.Time
	}
	streamBody := strings.Replace(body, `"thirty at once"`, `"twenty streams"`, 1)[:len(body)-1] + `,"stream":true}`
	streams := make([]timed, 20)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPost, h.bases()[i%3]+"/v1/messages", strings.NewReader(streamBody))
			req.Header.Set("X-Api-Key", acmeKey)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				streams[i].a.err = err
				return
			}
			defer resp.Body.Close()
			streams[i].a.status, streams[i].a.header = resp.StatusCode, resp.Header
			var b strings.Builder
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "event: ") {
					if streams[i].first.IsZero() {
						streams[i].first = time.Now()
					}
					streams[i].last = time.Now()
				}
				b.WriteString(sc.Text() + "\n")
			}
			streams[i].a.body = b.String()
		}()
	}
	close(start)
	wg.Wait()
	var leaderLast time.Time
	for _, s := range streams {
		if s.a.header.Get("X-Corral-Cache") == "MISS" {
			leaderLast = s.last
		}
	}
	for i, s := range streams {
		a := s.a
		if a.err != nil || a.status != 200 || !strings.HasPrefix(a.body, "event: message_start") || !strings.Contains(a.body, "event: message_stop") {
			t.Fatalf("stream %d: %v %d %q", i, a.err, a.status, a.body)
		}
		if text(a.body) != text(streams[0].a.body) || text(a.body) == "" {
			t.Errorf("stream %d text %q; want %q", i, text(a.body), text(streams[0].a.body))
		}
		if !leaderLast.IsZero() && !s.first.Before(leaderLast) {
			t.Errorf("stream %d (%s) got its first event after the leader's last", i, a.header.Get("X-Corral-Cache"))
		}
	}
	if n := messagesCalls(h); n != 2 {
		t.Errorf("20 identical streams: %d upstream calls in all; want 2 (one per prompt)", n)
	}
}

// text joins the text_delta pieces of a Messages event stream.
func text(stream string) string {
	var b strings.Builder
	for line := range strings.SplitSeq(stream, "\n") {
		if _, after, ok := strings.Cut(line, `"type":"text_delta","text":"`); ok {
			piece, _, _ := strings.Cut(after, `"`)
			b.WriteString(piece)
		} else if _, after, ok := strings.Cut(line, `"text":"`); ok && strings.Contains(line, `"text_delta"`) {
			piece, _, _ := strings.Cut(after, `"`)
			b.WriteString(piece)
		}
	}
	return b.String()
}

// TestMessagesCutStreamStoresNothing: a Messages stream cut mid-way ends
// with Anthropic's error event, no message_stop, and nothing stored.
func TestMessagesCutStreamStoresNothing(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.mock.StreamChunks = 4 })
	body := `{"model":"mock-cut","max_tokens":64,"messages":[{"role":"user","content":"a b c d e f g h"}],"stream":true}`
	a := postMessages(context.Background(), h.gw.URL+"/v1/messages", acmeKey, body)
	if !strings.Contains(a.body, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\"") || strings.Contains(a.body, "message_stop") {
		t.Fatalf("cut stream = %s", a.body)
	}
	b := postMessages(context.Background(), h.gw.URL+"/v1/messages", acmeKey, strings.Replace(body, `,"stream":true`, "", 1))
	if b.header.Get("X-Corral-Cache") != "MISS" || messagesCalls(h) != 2 {
		t.Errorf("after a cut stream: %s, %d calls; want a MISS (nothing stored)", b.header.Get("X-Corral-Cache"), messagesCalls(h))
	}
}

// TestMessagesServerToolsBypass: a tool Anthropic runs itself (web search,
// code execution, an MCP server) makes the answer depend on more than the
// prompt, so such a request is never cached or coalesced, as hosted tools
// are on the Responses API; tools the client runs are cached (issue 26,
// point 14).
func TestMessagesServerToolsBypass(t *testing.T) {
	h := newHarness(t, withAnthropic)
	ctx := context.Background()
	body := func(text, tools string) string {
		return `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"` + text + `"}],` + tools + `}`
	}
	tests := []struct {
		name, body string
		want       []string
		calls      int64
	}{
		{"web search", body("news", `"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":3}]`), []string{cacheBypass, cacheBypass}, 2},
		{"code execution", body("run", `"tools":[{"type":"code_execution_20250825","name":"code_execution"}]`), []string{cacheBypass, cacheBypass}, 2},
		{"mcp connector", body("mcp", `"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"docs"}],"tools":[{"type":"mcp_toolset","mcp_server_name":"docs"}]`), []string{cacheBypass, cacheBypass}, 2},
		{"custom tool", body("weather", `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`), []string{cacheMiss, cacheHit}, 1},
		{"client-run bash", body("ls", `"tools":[{"type":"bash_20250124","name":"bash"}]`), []string{cacheMiss, cacheHit}, 1},
	}
	for _, tt := range tests {
		before := messagesCalls(h)
		var got []string
		for range 2 {
			a := postMessages(ctx, h.gw.URL+"/v1/messages", acmeKey, tt.body, "anthropic-version", "2023-06-01")
			if a.status != 200 {
				t.Fatalf("%s: %d %s", tt.name, a.status, a.body)
			}
			got = append(got, a.header.Get("X-Corral-Cache"))
		}
		calls := messagesCalls(h) - before
		if !slices.Equal(got, tt.want) || calls != tt.calls {
			t.Errorf("%s: %v with %d upstream calls; want %v with %d", tt.name, got, calls, tt.want, tt.calls)
		}
	}
}
