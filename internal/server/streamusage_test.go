package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
)

// usageUpstream is a fake OpenAI chat upstream that answers every prompt
// with a fixed, large usage, streamed the way OpenAI streams it: a role
// and content chunk, more content, a finish chunk, then (only when the
// request's stream_options.include_usage is true) a chunk with "choices":
// [] and the usage, "usage": null in every earlier chunk, and [DONE].
type usageUpstream struct {
	promptTokens int
	// refuse, when set, answers any body with a top-level stream_options
	// 400 with param "stream_options", as servers without the field do.
	refuse bool
	// hold, when set, is waited for after the first chunk of a stream.
	hold chan struct{}
	// started receives once for every stream that sent its first chunk.
	started chan struct{}

	mu     sync.Mutex // protects bodies
	bodies []string   // every request body, in order
}

func (u *usageUpstream) seen() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]string(nil), u.bodies...)
}

func (u *usageUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	u.mu.Lock()
	u.bodies = append(u.bodies, string(raw))
	u.mu.Unlock()
	var req struct {
		Model         string          `json:"model"`
		Stream        bool            `json:"stream"`
		StreamOptions json.RawMessage `json:"stream_options"`
		Messages      []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(raw, &req); err != nil || len(req.Messages) == 0 {
		writeAPIError(w, "We could not parse the JSON body of your request.", "null")
		return
	}
	text := req.Messages[len(req.Messages)-1].Content
	switch {
	case u.refuse && req.StreamOptions != nil:
		writeAPIError(w, "Unrecognized request argument supplied: stream_options", `"stream_options"`)
		return
	case strings.HasPrefix(text, "refuse me"):
		// A client's own bad request, its text echoed in the message.
		writeAPIError(w, fmt.Sprintf("Invalid 'messages[0].content': %q is not allowed.", text), `"messages"`)
		return
	}
	var opts struct {
		IncludeUsage bool `json:"include_usage"`
	}
	_ = json.Unmarshal(req.StreamOptions, &opts)
	usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d}`, u.promptTokens, u.promptTokens+2)
	id := "chatcmpl-usage" + fmt.Sprint(len(text))
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":%q,"object":"chat.completion","created":1735689600,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"big answer","refusal":null},"logprobs":null,"finish_reason":"stop"}],"usage":%s}`, id, req.Model, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	tail := "}"
	if opts.IncludeUsage {
		tail = `,"usage":null}`
	}
	chunk := func(choices string) {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1735689600,\"model\":%q,\"system_fingerprint\":\"fp_fake\",\"choices\":[%s]%s\n\n", id, req.Model, choices, tail)
		w.(http.Flusher).Flush()
	}
	chunk(`{"index":0,"delta":{"role":"assistant","content":"big ","refusal":null},"logprobs":null,"finish_reason":null}`)
	if u.started != nil {
		u.started <- struct{}{}
	}
	if u.hold != nil {
		select {
		case <-u.hold:
		case <-r.Context().Done():
			return
		}
	}
	chunk(`{"index":0,"delta":{"content":"answer"},"logprobs":null,"finish_reason":null}`)
	chunk(`{"index":0,"delta":{},"logprobs":null,"finish_reason":"stop"}`)
	if opts.IncludeUsage {
		fmt.Fprintf(w, "data: {\"id\":%q,\"object\":\"chat.completion.chunk\",\"created\":1735689600,\"model\":%q,\"system_fingerprint\":\"fp_fake\",\"choices\":[],\"usage\":%s}\n\n", id, req.Model, usage)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
}

// writeAPIError writes OpenAI's 400 error object with param (JSON).
func writeAPIError(w http.ResponseWriter, msg, param string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	fmt.Fprintf(w, `{"error":{"message":%q,"type":"invalid_request_error","param":%s,"code":null}}`, msg, param)
}

// withUpstreams routes to the fakes by name, each serving its models.
func withUpstreams(tb testing.TB, fakes map[string]http.Handler, models map[string][]string) func(*harnessOptions) {
	tb.Helper()
	var ms []*pool.Member
	clients := map[string]failover.Doer{}
	for name, h := range fakes {
		srv := httptest.NewServer(h)
		tb.Cleanup(srv.Close)
		c, err := upstream.New(upstream.Options{BaseURL: srv.URL + "/v1", APIKey: upstreamKey, Timeout: 10 * time.Second})
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(c.CloseIdleConnections)
		ms = append(ms, &pool.Member{Name: name, API: "openai", Models: models[name], Weight: 1})
		clients[name] = c
	}
	return withServer(func(so *Options) {
		so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: clients}, failover.Options{Timeout: 10 * time.Second, NoHealth: true})
	})
}

// streamUsage is the total_tokens of the usage chunk in an SSE body, or -1.
func streamUsage(t *testing.T, body string) int {
	t.Helper()
	for ev := range strings.SplitSeq(body, "\n\n") {
		data, ok := strings.CutPrefix(strings.TrimSpace(ev), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []json.RawMessage `json:"choices"`
			Usage   *struct {
				TotalTokens int `json:"total_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		if chunk.Usage != nil {
			return chunk.Usage.TotalTokens
		}
	}
	return -1
}

// TestStreamUsageChargedWhenTheClientDeclinesIt: a streaming client that
// sends stream_options {"include_usage": false} still has its flight ask
// the upstream for usage (its other stream_options kept), so its actual
// tokens are charged and the stored entry has usage, while its own stream
// has no usage chunk (issue 26, point 10).
func TestStreamUsageChargedWhenTheClientDeclinesIt(t *testing.T) {
	fake := &usageUpstream{promptTokens: 50000}
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm", "sk-tpm", 0, 1000)}
	}, withUpstreams(t, map[string]http.Handler{"default": fake}, nil))
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":10,"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":false},"messages":[{"role":"user","content":"long document %d"}]}`, i)
	}
	var statuses []int
	for i := range 3 {
		a := send(context.Background(), h.gw.URL, "sk-tpm", body(i))
		statuses = append(statuses, a.status)
		if a.status == 200 && streamUsage(t, a.body) != -1 {
			t.Errorf("stream %d carries a usage chunk its client declined: %s", i, a.body)
		}
	}
	if statuses[0] != 200 || statuses[1] != 429 || statuses[2] != 429 {
		t.Errorf("three 50k-token streams within 1,000 tokens/min: %v; want 200, then 429 (the actual usage charged)", statuses)
	}
	if got := fake.seen(); len(got) != 1 || !strings.Contains(got[0], `"stream_options":{"include_usage":true,"include_obfuscation":false}`) {
		t.Errorf("upstream saw %q; want one body asking for usage with the client's other stream_options", got)
	}
	// The stored entry has the usage, for its whole TTL.
	hit := send(context.Background(), h.gw.URL, "sk-tpm", `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"long document 0"}]}`)
	var c struct {
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	if err := json.Unmarshal([]byte(hit.body), &c); err != nil || hit.header.Get("X-Corral-Cache") != cacheHit || c.Usage.TotalTokens != 50002 {
		t.Errorf("non-streaming hit: %s %s; want a HIT with total_tokens 50002", hit.header.Get("X-Corral-Cache"), hit.body)
	}
}

// TestStreamUsageReachesTheFollowersWhoAskedForIt: one flight, led by a
// client that declined usage; the follower that asked for it gets the
// usage chunk live, the one that did not gets none.
func TestStreamUsageReachesTheFollowersWhoAskedForIt(t *testing.T) {
	fake := &usageUpstream{promptTokens: 50000, hold: make(chan struct{}), started: make(chan struct{}, 1)}
	h := newHarness(t, withUpstreams(t, map[string]http.Handler{"default": fake}, nil))
	const prompt = `"messages":[{"role":"user","content":"shared stream"}]}`
	leader := openStream(t, h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false},`+prompt)
	<-fake.started
	asked := openStream(t, h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},`+prompt)
	plain := openStream(t, h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,`+prompt)
	close(fake.hold)
	usage := func(c *streamClient) int {
		var b strings.Builder
		for ev := range c.events {
			b.WriteString("data: " + ev.data + "\n\n")
		}
		return streamUsage(t, b.String())
	}
	tests := []struct {
		name  string
		c     *streamClient
		cache string
		usage int
	}{
		{"leader (declined)", leader, cacheMiss, -1},
		{"follower that asked", asked, cacheCoalesced, 50002},
		{"follower that did not", plain, cacheCoalesced, -1},
	}
	for _, tt := range tests {
		if got, cache := usage(tt.c), tt.c.header.Get("X-Corral-Cache"); got != tt.usage || cache != tt.cache {
			t.Errorf("%s: %s with usage %d; want %s with %d", tt.name, cache, got, tt.cache, tt.usage)
		}
	}
	if n := len(fake.seen()); n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
}

// TestStreamOptionsRefusalIsPerUpstream: an upstream that refuses
// stream_options (its error's param says so) is sent the client's own
// body from then on; another upstream keeps the splice, and a client's
// own 400 whose message mentions stream_options changes nothing (issue
// 26, point 9).
func TestStreamOptionsRefusalIsPerUpstream(t *testing.T) {
	old := &usageUpstream{promptTokens: 7, refuse: true}
	cur := &usageUpstream{promptTokens: 7}
	h := newHarness(t, withUpstreams(t, map[string]http.Handler{"old": old, "current": cur},
		map[string][]string{"old": {"old-model"}, "current": {"gpt-4o-mini"}}))
	stream := func(model, text string) answer {
		return send(context.Background(), h.gw.URL, acmeKey, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"`+text+`"}]}`)
	}
	if a := stream("old-model", "first"); a.status != 200 || !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
		t.Fatalf("stream through an upstream without stream_options: %d %q", a.status, a.body)
	}
	if a := stream("old-model", "second"); a.status != 200 {
		t.Fatalf("second stream: %d %q", a.status, a.body)
	}
	got := old.seen()
	if len(got) != 3 || !strings.Contains(got[0], `"include_usage":true`) || strings.Contains(got[1], "stream_options") || strings.Contains(got[2], "stream_options") {
		t.Errorf("old upstream saw %q; want the splice refused once, then the clients' own bodies only", got)
	}
	// A client's own 400 that names stream_options in its message.
	if a := stream("gpt-4o-mini", "refuse me: stream_options"); a.status != 400 {
		t.Fatalf("client's bad request: %d %s", a.status, a.body)
	}
	if a := stream("gpt-4o-mini", "after both"); a.status != 200 {
		t.Fatalf("stream to the current upstream: %d %s", a.status, a.body)
	}
	got = cur.seen()
	if len(got) != 2 || !strings.Contains(got[1], `"stream_options":{"include_usage":true}`) {
		t.Errorf("current upstream saw %q; want the splice still sent", got)
	}
	hit := send(context.Background(), h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"after both"}]}`)
	if hit.header.Get("X-Corral-Cache") != cacheHit || !strings.Contains(hit.body, `"total_tokens":9`) {
		t.Errorf("non-streaming hit of the current upstream's stream: %s %s; want a HIT with usage", hit.header.Get("X-Corral-Cache"), hit.body)
	}
}
