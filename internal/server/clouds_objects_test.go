package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"

	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/pool"
	"github.com/corralhq/corral/internal/upstream"
)

// cloud stands for a cloud's runtime API (Bedrock, Vertex AI) as the
// router sees it: a Scoped Doer that serves model calls only and keeps
// no stored object. It counts every call that reaches it, by path.
type cloud struct {
	d     failover.Doer
	calls atomic.Int64

	mu    sync.Mutex // protects paths
	paths []string
}

var _ failover.Scoped = (*cloud)(nil)

// newCloud is a cloud in front of the mock model.
func newCloud(t *testing.T) *cloud {
	t.Helper()
	srv := httptest.NewServer(mockllm.New(mockllm.Options{}))
	t.Cleanup(srv.Close)
	c, err := upstream.New(upstream.Options{BaseURL: srv.URL + "/v1", APIKey: upstreamKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return &cloud{d: c}
}

func (c *cloud) Do(ctx context.Context, req upstream.Request) (*http.Response, error) {
	c.calls.Add(1)
	c.mu.Lock()
	c.paths = append(c.paths, req.Method+" "+req.Path)
	c.mu.Unlock()
	return c.d.Do(ctx, req)
}

// Serves: the model calls a cloud's runtime API answers, nothing else.
func (c *cloud) Serves(method, path string) bool {
	switch path {
	case "/messages", "/messages/count_tokens", "/chat/completions", "/embeddings":
		return method == http.MethodPost
	}
	return false
}

func (c *cloud) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.paths...)
}

// cloudMember is one upstream of the router cloudsRouter builds.
type cloudMember struct {
	m *pool.Member
	d failover.Doer
}

func cloudsRouter(members ...cloudMember) *failover.Router {
	var ms []*pool.Member
	clients := map[string]failover.Doer{}
	for _, cm := range members {
		ms = append(ms, cm.m)
		clients[cm.m.Name] = cm.d
	}
	return failover.New(&failover.Set{Pool: pool.New(ms, pool.Options{}), Clients: clients}, failover.Options{Timeout: 10 * time.Second})
}

const (
	notServedOpenAI    = `{"error":{"message":"No upstream of this gateway serves this endpoint.","type":"invalid_request_error","param":null,"code":"not_found"}}`
	notServedAnthropic = `{"type":"error","error":{"type":"not_found_error","message":"No upstream of this gateway serves this endpoint."}}`
)

// TestCloudsKeepNoStoredObjects: with only Bedrock and Vertex upstreams,
// every stored-object endpoint (files, batches, stored responses,
// conversations, vector stores, message batches; create, read, list,
// delete) is 404 in its API's shape and reaches no upstream, while model
// calls still go to the clouds.
func TestCloudsKeepNoStoredObjects(t *testing.T) {
	bedrock, vertex := newCloud(t), newCloud(t)
	h := newHarness(t, withServer(func(so *Options) {
		so.Upstreams = cloudsRouter(
			cloudMember{&pool.Member{Name: "bedrock-us", API: "anthropic", Provider: "bedrock", Weight: 1}, bedrock},
			cloudMember{&pool.Member{Name: "vertex-oai", API: "openai", Provider: "vertex", Weight: 1}, vertex})
	}))
	base := h.gw.URL
	// An object id the tenant has no record of is Corral's own "No such
	// object" before any routing (tenants never reach each other's
	// objects); every other call is the clouds' "not served".
	tests := []struct {
		method, path, body string
		anthropic          bool
		unknown            string // the object id refused as unknown
	}{
		{method: "POST", path: "/v1/files", body: `{"purpose":"batch"}`},
		{method: "GET", path: "/v1/files"},
		{method: "GET", path: "/v1/files/file-abc", unknown: "file-abc"},
		{method: "GET", path: "/v1/files/file-abc/content", unknown: "file-abc"},
		{method: "DELETE", path: "/v1/files/file-abc", unknown: "file-abc"},
		{method: "POST", path: "/v1/batches", body: `{"input_file_id":"file-abc","endpoint":"/v1/chat/completions","completion_window":"24h"}`, unknown: "file-abc"},
		{method: "GET", path: "/v1/batches"},
		{method: "GET", path: "/v1/batches/batch_abc", unknown: "batch_abc"},
		{method: "POST", path: "/v1/batches/batch_abc/cancel", unknown: "batch_abc"},
		{method: "POST", path: "/v1/responses", body: `{"model":"gpt-4o","input":"hi","store":true}`},
		{method: "GET", path: "/v1/responses/resp_abc", unknown: "resp_abc"},
		{method: "GET", path: "/v1/responses/resp_abc/input_items", unknown: "resp_abc"},
		{method: "DELETE", path: "/v1/responses/resp_abc", unknown: "resp_abc"},
		{method: "POST", path: "/v1/conversations", body: `{}`},
		{method: "GET", path: "/v1/conversations/conv_abc", unknown: "conv_abc"},
		{method: "GET", path: "/v1/vector_stores"},
		{method: "POST", path: "/v1/vector_stores", body: `{"name":"x"}`},
		{method: "GET", path: "/v1/chat/completions"},
		{method: "POST", path: "/v1/messages/batches", body: `{"requests":[]}`, anthropic: true},
		{method: "GET", path: "/v1/messages/batches", anthropic: true},
		{method: "GET", path: "/v1/messages/batches/msgbatch_abc", anthropic: true, unknown: "msgbatch_abc"},
		{method: "GET", path: "/v1/messages/batches/msgbatch_abc/results", anthropic: true, unknown: "msgbatch_abc"},
		{method: "GET", path: "/v1/files", anthropic: true},
		{method: "GET", path: "/v1/files/file_abc", anthropic: true, unknown: "file_abc"},
	}
	for _, tt := range tests {
		req := objectstest.NewRequest(t, tt.method, base+tt.path, acmeKey, tt.body)
		if tt.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		want := notServedOpenAI
		if tt.unknown != "" {
			want = objectstest.NotFoundBody(tt.unknown)
		}
		if tt.anthropic {
			req.Header.Set("anthropic-version", "2023-06-01")
			want = notServedAnthropic
			if tt.unknown != "" {
				want = `{"type":"error","error":{"type":"not_found_error","message":"No such object: ` + tt.unknown + `"}}`
			}
		}
		if code, body := objectstest.Do(t, req); code != 404 || strings.TrimSpace(body) != want {
			t.Errorf("%s %s (anthropic %v): %d %s; want 404 %s", tt.method, tt.path, tt.anthropic, code, body, want)
		}
	}
	if n := bedrock.calls.Load() + vertex.calls.Load(); n != 0 {
		t.Errorf("the clouds got %d calls for stored objects (%v, %v); want none", n, bedrock.seen(), vertex.seen())
	}
	// Model calls still reach them.
	if a := postMessages(context.Background(), base+"/v1/messages", acmeKey, `{"model":"claude-x","max_tokens":8,"messages":[{"role":"user","content":"x"}]}`); a.status != 200 ||
		a.header.Get("X-Corral-Upstream") != "bedrock-us" || a.header.Get("X-Corral-Provider") != "bedrock" {
		t.Errorf("messages: %d from %q (%q) %s", a.status, a.header.Get("X-Corral-Upstream"), a.header.Get("X-Corral-Provider"), a.body)
	}
	if a := send(context.Background(), base, acmeKey, chatBody("to vertex")); a.status != 200 || a.header.Get("X-Corral-Provider") != "vertex" {
		t.Errorf("chat: %d from %q %s", a.status, a.header.Get("X-Corral-Provider"), a.body)
	}
	if b, v := bedrock.calls.Load(), vertex.calls.Load(); b != 1 || v != 1 {
		t.Errorf("model calls: bedrock %d, vertex %d; want 1 each", b, v)
	}
}

// TestStoredObjectsGoToAzureBesideACloud: with an Azure upstream (which
// keeps files and batches) beside a Vertex one on the OpenAI API, files,
// batches and their lists go to Azure, even though Vertex is tried first
// for model calls; Vertex gets only the chat call.
func TestStoredObjectsGoToAzureBesideACloud(t *testing.T) {
	vertex := newCloud(t)
	az := objectstest.New()
	azSrv := httptest.NewServer(az)
	t.Cleanup(azSrv.Close)
	azc, err := upstream.New(upstream.Options{BaseURL: azSrv.URL + "/v1", APIKey: upstreamKey, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var r *failover.Router
	h := newHarness(t, withServer(func(so *Options) {
		r = cloudsRouter(
			cloudMember{&pool.Member{Name: "vertex-oai", API: "openai", Provider: "vertex", Priority: 0, Weight: 1}, vertex},
			cloudMember{&pool.Member{Name: "azure-east", API: "openai", Provider: "azure", Priority: 1, Weight: 1}, azc})
		so.Upstreams = r
	}))
	c := objectstest.SDK(h.gw.URL, acmeKey)
	ctx := context.Background()
	f, err := c.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(`{"custom_id":"x"}`+"\n"), "in.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if !az.Has(f.ID) {
		t.Errorf("file %s is not at Azure", f.ID)
	}
	if _, err := c.Files.Get(ctx, f.ID); err != nil {
		t.Errorf("file get: %v", err)
	}
	b, err := c.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("batch: %v", err)
	}
	if !az.Has(b.ID) {
		t.Errorf("batch %s is not at Azure", b.ID)
	}
	// The list holds the input file (and the batch's output file, which
	// the fake makes at once), every one of them Azure's.
	ids := objectstest.ListIDs(t, h.gw.URL, "/v1/files", acmeKey)
	if !slices.Contains(ids, f.ID) {
		t.Errorf("file list = %v; want %s in it", ids, f.ID)
	}
	for _, id := range ids {
		if !az.Has(id) {
			t.Errorf("listed file %s is not Azure's", id)
		}
	}
	if a := send(ctx, h.gw.URL, acmeKey, chatBody("to vertex first")); a.status != 200 || a.header.Get("X-Corral-Upstream") != "vertex-oai" {
		t.Errorf("chat: %d from %q", a.status, a.header.Get("X-Corral-Upstream"))
	}
	if got := vertex.seen(); len(got) != 1 || got[0] != "POST /chat/completions" {
		t.Errorf("vertex got %v; want only the chat call", got)
	}

	// A reload makes azure-east a cloud of the same name: the file's
	// record still names it, and the follow-up is not sent there.
	moved := newCloud(t)
	r.Swap(&failover.Set{Pool: pool.New([]*pool.Member{{Name: "azure-east", API: "openai", Provider: "bedrock", Weight: 1}}, pool.Options{}),
		Clients: map[string]failover.Doer{"azure-east": moved}})
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+f.ID, acmeKey, ""); code != 404 || strings.TrimSpace(body) != notServedOpenAI {
		t.Errorf("file get after azure-east became a cloud: %d %s; want 404 %s", code, body, notServedOpenAI)
	}
	if got := moved.seen(); len(got) != 0 {
		t.Errorf("the cloud now called azure-east got %v; want nothing", got)
	}
}
