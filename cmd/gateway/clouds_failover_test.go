package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
	"github.com/corralhq/corral/internal/provider/vertex/vertextest"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// One Anthropic request fails over from Anthropic's own API (500) to
// Bedrock, and from Bedrock (throttled) to Vertex AI, across three
// gateway instances on one redis-server: each prompt costs one answering
// upstream call however many instances ask at once, X-Corral-Upstream and
// X-Corral-Provider name whoever answered, and the prompt is a HIT
// afterwards on every instance whichever cloud answered it. A stream led
// on one instance is read live by followers on the others, whichever
// cloud serves it.
func TestFailoverAcrossClouds(t *testing.T) {
	dir := t.TempDir()
	awsEnv(t, "")
	vx := vertextest.New(t, vertextest.Options{})
	googleEnv(t, vx.CredentialsFile)

	// Anthropic's API is down for every prompt.
	var anthropicCalls atomic.Int64
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		anthropicCalls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
	}))
	t.Cleanup(down.Close)
	// Bedrock throttles prompts that say so, and holds the stream of "live"
	// after its first delta until hold is closed.
	hold := make(chan struct{})
	br := bedrocktest.New(t, bedrocktest.Options{Reply: func(c bedrocktest.Call) bedrocktest.Reply {
		switch text := string(c.Body); {
		case strings.Contains(text, "bedrock is busy"):
			return bedrocktest.Reply{Status: http.StatusTooManyRequests, Error: "ThrottlingException", Message: "Too many requests, please wait before trying again."}
		case strings.Contains(text, "live"):
			return bedrocktest.Reply{Hold: hold}
		}
		return bedrocktest.Reply{}
	}})
	upstreams := writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+
		"  - name: anthropic\n    api: anthropic\n    url: "+down.URL+"/v1\n    models: [\"claude-*\"]\n"+
		"  - name: bedrock-us\n    api: anthropic\n    provider: bedrock\n    url: "+br.URL+"\n    region: us-east-1\n"+
		"    aliases: {\"claude-sonnet-4-5*\": \"us.anthropic.claude-sonnet-4-5-20250929-v1:0\"}\n    priority: 1\n"+
		"  - name: vertex-eu\n    api: anthropic\n    provider: vertex\n    url: "+vx.URL+"\n    project: test-project\n    region: us-east5\n"+
		"    aliases: {\"claude-sonnet-4-5*\": \"claude-sonnet-4-5@20250929\"}\n    priority: 2\n")
	rs := redistest.Start(t)
	env := []string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_TENANTS_FILE=" + writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-acme"))),
		"CORRAL_UPSTREAMS_FILE=" + upstreams,
		"CORRAL_DATA_DIR=" + filepath.Join(dir, "data"),
	}
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var bases []string
	for range 3 {
		bases = append(bases, serveGateway(t, wireGateway(t, gatewayOptions{Logger: log}, env...)).URL)
	}
	body := func(prompt string, stream bool) string {
		return fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":64,"stream":%t,"messages":[{"role":"user","content":%q}]}`, stream, prompt)
	}
	hdr := http.Header{"Anthropic-Version": {"2023-06-01"}}

	// burst sends n identical requests for prompt, spread over the
	// instances, and returns each answer's status and headers by
	// X-Corral-Cache.
	burst := func(prompt string, n int) map[string][]http.Header {
		var mu sync.Mutex
		got := map[string][]http.Header{}
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				status, h, b := bedrockPost(t, bases[i%3], body(prompt, false), hdr)
				if status != http.StatusOK || !strings.Contains(b, `"type":"message"`) {
					t.Errorf("%q: %d %s", prompt, status, b)
					return
				}
				mu.Lock()
				got[h.Get("X-Corral-Cache")] = append(got[h.Get("X-Corral-Cache")], h)
				mu.Unlock()
			})
		}
		wg.Wait()
		return got
	}
	for _, tc := range []struct{ prompt, upstream, provider string }{
		{"anthropic is down", "bedrock-us", "bedrock"},
		{"anthropic is down and bedrock is busy", "vertex-eu", "vertex"},
	} {
		a0, b0, v0 := anthropicCalls.Load(), br.Count(), vx.Calls()
		got := burst(tc.prompt, 30)
		// One leads; the rest wait for it, or come after it stored the
		// answer and hit.
		if len(got["MISS"]) != 1 || len(got["MISS"])+len(got["COALESCED"])+len(got["HIT"]) != 30 {
			t.Fatalf("%q: answers by X-Corral-Cache %v; want 1 MISS and the rest COALESCED or HIT", tc.prompt, counts(got))
		}
		for _, h := range append(got["MISS"], got["COALESCED"]...) {
			if h.Get("X-Corral-Upstream") != tc.upstream || h.Get("X-Corral-Provider") != tc.provider {
				t.Errorf("%q: X-Corral-Upstream %q, X-Corral-Provider %q; want %s, %s", tc.prompt,
					h.Get("X-Corral-Upstream"), h.Get("X-Corral-Provider"), tc.upstream, tc.provider)
			}
		}
		wantB, wantV := int64(1), 0
		if tc.provider == "vertex" {
			wantV = 1
		}
		if a, b, v := anthropicCalls.Load()-a0, int64(br.Count()-b0), vx.Calls()-v0; a != 1 || b != wantB || v != wantV {
			t.Errorf("%q: upstream calls anthropic %d, bedrock %d, vertex %d; want 1, %d, %d (one per candidate tried, once for all 30)",
				tc.prompt, a, b, v, wantB, wantV)
		}
		// Afterwards the prompt is a HIT on every instance, with no call.
		a0, b0, v0 = anthropicCalls.Load(), br.Count(), vx.Calls()
		for _, base := range bases {
			status, h, _ := bedrockPost(t, base, body(tc.prompt, false), hdr)
			if status != http.StatusOK || h.Get("X-Corral-Cache") != "HIT" || h.Get("X-Corral-Upstream") != "" {
				t.Errorf("%q again: %d, X-Corral-Cache %q, X-Corral-Upstream %q; want a HIT naming no upstream",
					tc.prompt, status, h.Get("X-Corral-Cache"), h.Get("X-Corral-Upstream"))
			}
		}
		if anthropicCalls.Load() != a0 || br.Count() != b0 || vx.Calls() != v0 {
			t.Errorf("%q: the HITs called an upstream", tc.prompt)
		}
	}

	// A stream that failed over to Bedrock is led on one instance and read
	// live on the others: every follower has its first delta while Bedrock
	// still holds the rest.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b0 := br.Count()
	const streams = 9
	var firsts sync.WaitGroup
	firsts.Add(streams)
	results := make([]bedrockStream, streams)
	var done sync.WaitGroup
	for i := range streams {
		done.Go(func() {
			status, r := bedrockLiveStream(ctx, bases[i%3], "a live stream", firsts.Done)
			if status != http.StatusOK {
				t.Errorf("stream %d: status %d", i, status)
			}
			results[i] = r
		})
	}
	firsts.Wait() // each stream has its first delta, and Bedrock is still holding
	close(hold)
	done.Wait()
	miss := 0
	for i, r := range results {
		if !r.stopped || r.text == "" {
			t.Errorf("stream %d: text %q, stopped %v; want the whole answer", i, r.text, r.stopped)
		}
		if r.cache == "MISS" {
			miss++
		} else if r.cache != "COALESCED" {
			t.Errorf("stream %d: X-Corral-Cache %q", i, r.cache)
		}
	}
	if miss != 1 || br.Count()-b0 != 1 {
		t.Errorf("%d streams: %d MISS, %d Bedrock calls; want 1 and 1", streams, miss, br.Count()-b0)
	}
	// The stream's entry serves a non-streaming request too.
	if status, h, b := bedrockPost(t, bases[2], body("a live stream", false), hdr); status != http.StatusOK ||
		h.Get("X-Corral-Cache") != "HIT" || !strings.Contains(b, `"stop_reason"`) {
		t.Errorf("non-streaming after the stream: %d %q %s", status, h.Get("X-Corral-Cache"), b)
	}
	if strings.Contains(logs.String(), bedrocktest.DefaultSecretAccessKey) || strings.Contains(logs.String(), vx.PrivateKeyPEM()[40:80]) {
		t.Error("a credential appears in the gateways' log")
	}
}

// counts is how many answers each X-Corral-Cache value had.
func counts(m map[string][]http.Header) map[string]int {
	out := map[string]int{}
	for k, v := range m {
		out[k] = len(v)
	}
	return out
}
