package server

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	goopenai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// fakeUpstream is one upstream of several: the mock model behind a switch
// that can make it answer a fixed status instead, counting calls and
// checking that every call carries this upstream's own key.
type fakeUpstream struct {
	name, key string
	provider  string // who runs it ("": the API's own, openai)
	srv       *httptest.Server
	calls     atomic.Int64
	status    atomic.Int64 // 0: answer; else this status
	wrongKey  atomic.Int64
}

func newFakeUpstream(t testing.TB, name string, mo mockllm.Options) *fakeUpstream {
	f := &fakeUpstream{name: name, key: "sk-" + name + "-secret"}
	mock := mockllm.New(mo)
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		if r.Header.Get("Authorization") != "Bearer "+f.key {
			f.wrongKey.Add(1)
		}
		if st := f.status.Load(); st != 0 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(int(st))
			fmt.Fprintf(w, `{"error":{"message":"%s is failing","type":"server_error","param":null,"code":null}}`, f.name)
			return
		}
		mock.ServeHTTP(w, r)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

// routerOver builds a router over fakes: each spec is (fake, priority, weight).
type upSpec struct {
	f                *fakeUpstream
	priority, weight int
}

func routerOver(specs ...upSpec) *failover.Router {
	return routerWith(failover.Options{Timeout: 10 * time.Second}, specs...)
}

// routerWith is routerOver with the router's options.
func routerWith(o failover.Options, specs ...upSpec) *failover.Router {
	var ms []*pool.Member
	clients := map[string]failover.Doer{}
	for _, s := range specs {
		c, err := upstream.New(upstream.Options{BaseURL: s.f.srv.URL + "/v1", APIKey: s.f.key, Timeout: 5 * time.Second})
		if err != nil {
			panic(err) // an httptest URL always parses
		}
		ms = append(ms, &pool.Member{Name: s.f.name, API: "openai", Provider: s.f.provider, Priority: s.priority, Weight: s.weight})
		clients[s.f.name] = c
	}
	return failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: clients}, o)
}

// withRouters gives every instance its own router over the same fakes.
func withRouters(specs ...upSpec) func(*harnessOptions) {
	return func(o *harnessOptions) {
		prev := o.server
		o.server = func(so *Options) {
			if prev != nil {
				prev(so)
			}
			so.Upstreams = routerOver(specs...)
		}
	}
}

func TestWeightedSplitOverTwoUpstreams(t *testing.T) {
	a, b := newFakeUpstream(t, "a", mockllm.Options{}), newFakeUpstream(t, "b", mockllm.Options{})
	h := newHarness(t, withRouters(upSpec{a, 0, 3}, upSpec{b, 0, 1}))
	by := map[string]int{}
	const n = 400
	for i := range n {
		ans := send(context.Background(), h.gw.URL, acmeKey, chatBody(fmt.Sprintf("split %d", i)))
		if ans.status != 200 {
			t.Fatalf("request %d: %d %s", i, ans.status, ans.body)
		}
		by[ans.header.Get("X-Corral-Upstream")]++
	}
	if share := float64(by["a"]) / n; math.Abs(share-0.75) > 0.06 || by["a"]+by["b"] != n {
		t.Errorf("split %v: a took %.3f; want 0.75 ± 0.06", by, share)
	}
	if int(a.calls.Load()) != by["a"] || int(b.calls.Load()) != by["b"] || a.wrongKey.Load()+b.wrongKey.Load() != 0 {
		t.Errorf("calls a=%d b=%d, wrong keys %d/%d; headers said %v", a.calls.Load(), b.calls.Load(), a.wrongKey.Load(), b.wrongKey.Load(), by)
	}
}

func TestFailoverBeforeTheFirstByteOnly(t *testing.T) {
	primary := newFakeUpstream(t, "primary", mockllm.Options{StreamChunks: 4})
	secondary := newFakeUpstream(t, "secondary", mockllm.Options{StreamChunks: 4})
	h := newHarness(t, withRouters(upSpec{primary, 0, 1}, upSpec{secondary, 1, 1}))
	// Each trigger fails over; the answer names the upstream that gave it.
	for _, st := range []int{429, 500, 502, 503, 504} {
		primary.status.Store(int64(st))
		before := secondary.calls.Load()
		ans := send(context.Background(), h.gw.URL, acmeKey, chatBody(fmt.Sprintf("trigger %d", st)))
		if ans.status != 200 || ans.header.Get("X-Corral-Upstream") != "secondary" || secondary.calls.Load() != before+1 {
			t.Errorf("primary %d: %d from %q", st, ans.status, ans.header.Get("X-Corral-Upstream"))
		}
	}
	// A status that is an answer is not retried elsewhere.
	primary = newFakeUpstream(t, "primary", mockllm.Options{StreamChunks: 4})
	secondary = newFakeUpstream(t, "secondary", mockllm.Options{StreamChunks: 4})
	h = newHarness(t, withRouters(upSpec{primary, 0, 1}, upSpec{secondary, 1, 1}))
	for _, st := range []int{400, 404, 408, 409, 422} {
		primary.status.Store(int64(st))
		ans := send(context.Background(), h.gw.URL, acmeKey, chatBody(fmt.Sprintf("answer %d", st)))
		if ans.status != st || secondary.calls.Load() != 0 {
			t.Errorf("primary %d: client got %d; secondary called %d times", st, ans.status, secondary.calls.Load())
		}
	}
	primary.status.Store(0)
	// A stream fails over while nothing was relayed: a 503 before the
	// headers goes to the secondary...
	primary.status.Store(503)
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"stream over"}]}`
	ans := send(context.Background(), h.gw.URL, acmeKey, stream)
	if ans.status != 200 || ans.header.Get("X-Corral-Upstream") != "secondary" || !strings.HasSuffix(ans.body, "data: [DONE]\n\n") {
		t.Errorf("stream after a 503: %d from %q %q", ans.status, ans.header.Get("X-Corral-Upstream"), ans.body)
	}
	// ...but a stream cut after its first bytes is not replayed elsewhere:
	// the client gets an error event and nothing is stored.
	primary.status.Store(0)
	before := secondary.calls.Load()
	cut := send(context.Background(), h.gw.URL, acmeKey, `{"model":"mock-cut","stream":true,"messages":[{"role":"user","content":"cut mid-way"}]}`)
	if !strings.Contains(cut.body, `"error"`) || strings.Contains(cut.body, "[DONE]") || secondary.calls.Load() != before {
		t.Errorf("cut stream: secondary called %d more times; body %q", secondary.calls.Load()-before, cut.body)
	}
}

func TestCoalescingHoldsAcrossFailover(t *testing.T) {
	primary := newFakeUpstream(t, "primary", mockllm.Options{Latency: 100 * time.Millisecond})
	secondary := newFakeUpstream(t, "secondary", mockllm.Options{Latency: 100 * time.Millisecond})
	secondary.provider = "azure"
	primary.status.Store(503)
	h, _ := distributed(t, 3, withRouters(upSpec{primary, 0, 1}, upSpec{secondary, 1, 1}))
	answers := burst(h.bases(), 30, acmeKey, chatBody("failover herd"))
	for i, a := range answers {
		if a.status != 200 || a.body != answers[0].body {
			t.Fatalf("answer %d: %d %s", i, a.status, a.body)
		}
		if c := a.header.Get("X-Corral-Cache"); (c == "MISS" || c == "COALESCED") && (a.header.Get("X-Corral-Upstream") != "secondary" || a.header.Get("X-Corral-Provider") != "azure") {
			t.Errorf("answer %d (%s) names upstream %q provider %q; want the leader's, secondary and azure", i, c, a.header.Get("X-Corral-Upstream"), a.header.Get("X-Corral-Provider"))
		}
	}
	if n := secondary.calls.Load(); n != 1 {
		t.Errorf("30 identical requests while the primary fails: %d calls at the secondary; want 1", n)
	}
	if n := primary.calls.Load(); n != 1 {
		t.Errorf("the failing primary was tried %d times; want once, by the one leader", n)
	}
	// A hit names no upstream.
	if hit := send(context.Background(), h.bases()[0], acmeKey, chatBody("failover herd")); hit.header.Get("X-Corral-Cache") != "HIT" || hit.header.Get("X-Corral-Upstream") != "" || hit.header.Get("X-Corral-Provider") != "" {
		t.Errorf("hit: %s upstream %q provider %q; want neither named", hit.header.Get("X-Corral-Cache"), hit.header.Get("X-Corral-Upstream"), hit.header.Get("X-Corral-Provider"))
	}
}

func TestNoUpstreamServesTheModel(t *testing.T) {
	a := newFakeUpstream(t, "a", mockllm.Options{})
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) {
			c, _ := upstream.New(upstream.Options{BaseURL: a.srv.URL + "/v1", APIKey: a.key})
			ms := []*pool.Member{{Name: "a", API: "openai", Models: []string{"gpt-4o*"}, Weight: 1}}
			so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: map[string]failover.Doer{"a": c}}, failover.Options{})
		}
	})
	ans := send(context.Background(), h.gw.URL, acmeKey, `{"model":"llama-3","messages":[{"role":"user","content":"x"}]}`)
	if ans.status != 404 || !strings.Contains(ans.body, `"code":"model_not_found"`) || a.calls.Load() != 0 {
		t.Errorf("unserved model: %d %s (%d calls)", ans.status, ans.body, a.calls.Load())
	}
}

func TestSDKsAgainstTwoUpstreams(t *testing.T) {
	a, b := newFakeUpstream(t, "a", mockllm.Options{}), newFakeUpstream(t, "b", mockllm.Options{})
	a.status.Store(503)
	var logs bytes.Buffer
	h := newHarness(t, withRouters(upSpec{a, 0, 1}, upSpec{b, 1, 1}), func(o *harnessOptions) { o.logs = &logs })
	oc := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	var raw *http.Response
	r, err := oc.Chat.Completions.New(context.Background(), officialopenai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("official sdk")}}, option.WithResponseInto(&raw))
	if err != nil || r.Choices[0].Message.Content != "mock reply to: official sdk" || raw.Header.Get("X-Corral-Upstream") != "b" {
		t.Errorf("openai-go: %v %+v", err, r)
	}
	cfg := goopenai.DefaultConfig(acmeKey)
	cfg.BaseURL = h.gw.URL + "/v1"
	g, err := goopenai.NewClientWithConfig(cfg).CreateChatCompletion(context.Background(), goopenai.ChatCompletionRequest{Model: "gpt-4o-mini",
		Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "go-openai"}}})
	if err != nil || g.Choices[0].Message.Content != "mock reply to: go-openai" {
		t.Errorf("go-openai: %v %+v", err, g)
	}
	for _, secret := range []string{a.key, b.key} {
		if strings.Contains(logs.String(), secret) {
			t.Errorf("an upstream key is in the logs")
		}
	}
}

// TestObjectsAreFollowedUpWhereTheyLive: with two equal upstreams, files
// land on either; every follow-up (a read, a batch over the file) goes to
// the upstream that holds it, where a wrong one would answer 404.
func TestObjectsAreFollowedUpWhereTheyLive(t *testing.T) {
	fakes := map[string]*objectstest.Server{"east": objectstest.New(), "west": objectstest.New()}
	var ms []*pool.Member
	clients := map[string]failover.Doer{}
	for name, f := range fakes {
		srv := httptest.NewServer(f)
		t.Cleanup(srv.Close)
		c, _ := upstream.New(upstream.Options{BaseURL: srv.URL + "/v1"})
		ms = append(ms, &pool.Member{Name: name, API: "openai", Weight: 1})
		clients[name] = c
	}
	h := newHarness(t, objectTenants, func(o *harnessOptions) {
		o.server = func(so *Options) {
			so.Upstreams = failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: clients}, failover.Options{})
		}
	})
	c := objectstest.SDK(h.gw.URL, acmeKey)
	ctx := context.Background()
	where := map[string]int{}
	for i := range 20 { // all on one upstream by chance: 2 in a million
		f, err := c.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(`{"custom_id":"x"}`+"\n"), fmt.Sprintf("f%d.jsonl", i), "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
		if err != nil {
			t.Fatal(err)
		}
		for name, fk := range fakes {
			if fk.Has(f.ID) {
				where[name]++
			}
		}
		if _, err := c.Files.Get(ctx, f.ID); err != nil {
			t.Errorf("file %d: the follow-up went elsewhere: %v", i, err)
		}
		if _, err := c.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h}); err != nil {
			t.Errorf("file %d: the batch went elsewhere: %v", i, err)
		}
	}
	if where["east"] == 0 || where["west"] == 0 {
		t.Errorf("files landed %v; want some on each upstream (the test proves nothing otherwise)", where)
	}
}

// A live stream's followers name the leader's upstream and its provider
// on every instance:
// on the leader's, from its flight; on the others, from the first event of
// the Redis stream they mirror.
func TestLiveStreamFollowersNameTheLeadersUpstream(t *testing.T) {
	slow := mockllm.Options{StreamChunks: 10, ChunkDelay: 50 * time.Millisecond}
	primary, secondary := newFakeUpstream(t, "primary", slow), newFakeUpstream(t, "secondary", slow)
	secondary.provider = "azure"
	primary.status.Store(503)
	h, _ := distributed(t, 3, withRouters(upSpec{primary, 0, 1}, upSpec{secondary, 1, 1}))
	body := liveBody("followers name the leader's upstream")
	// Its header is back: the secondary's stream is under way, the lock held.
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	var followers []*streamClient
	for i := range 6 {
		followers = append(followers, openStream(t, h.bases()[i%3], acmeKey, body))
	}
	lead := drain(leader)
	if !lead.done || leader.header.Get("X-Corral-Cache") != cacheMiss || leader.header.Get("X-Corral-Upstream") != "secondary" || leader.header.Get("X-Corral-Provider") != "azure" {
		t.Fatalf("leader: done=%v %s from %q", lead.done, leader.header.Get("X-Corral-Cache"), leader.header.Get("X-Corral-Upstream"))
	}
	for i, f := range followers {
		d := drain(f)
		if d.text != lead.text || !d.done || f.header.Get("X-Corral-Cache") != cacheCoalesced {
			t.Errorf("follower %d on instance %d: done=%v %s; want the leader's text, COALESCED", i, i%3, d.done, f.header.Get("X-Corral-Cache"))
		}
		if got, prov := f.header.Get("X-Corral-Upstream"), f.header.Get("X-Corral-Provider"); got != "secondary" || prov != "azure" {
			t.Errorf("follower %d on instance %d names upstream %q provider %q; want the leader's, secondary and azure", i, i%3, got, prov)
		}
	}
	if n := secondary.calls.Load(); n != 1 {
		t.Errorf("secondary calls = %d; want 1", n)
	}
}
