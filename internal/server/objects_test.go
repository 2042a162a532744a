package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

const (
	betaKey   = "sk-beta-test-key"
	deniedKey = "sk-denied-test-key"
)

// objectTenants adds a second ordinary tenant (beta) and one with
// stored_objects: deny to the harness's acme.
func objectTenants(o *harnessOptions) {
	o.tenants = append(o.tenants,
		tenant.Spec{ID: "beta", KeySHA256: []string{tenant.HashKey(betaKey)}, MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: true},
		tenant.Spec{ID: "denied", KeySHA256: []string{tenant.HashKey(deniedKey)}, MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: true, DenyObjects: true},
	)
}

// pathLog records every path the upstream was asked for, whichever fake
// served it.
type pathLog struct {
	mu    sync.Mutex // protects paths
	paths []string
}

func (l *pathLog) add(p string) { l.mu.Lock(); l.paths = append(l.paths, p); l.mu.Unlock() }

// mentioning counts the upstream requests whose path or body named id.
func (l *pathLog) mentioning(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, p := range l.paths {
		if strings.Contains(p, id) {
			n++
		}
	}
	return n
}

// withObjectUpstream serves the stored-object paths from fake and the
// rest from the mock model, logging every path and body.
func withObjectUpstream(fake *objectstest.Server, log *pathLog) func(*harnessOptions) {
	return func(o *harnessOptions) {
		o.wrapUpstream = func(mock http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entry := r.Method + " " + r.URL.String()
				if r.Header.Get("Content-Type") == "application/json" {
					b, _ := io.ReadAll(r.Body)
					r.Body = io.NopCloser(bytes.NewReader(b))
					entry += " " + string(b)
				}
				log.add(entry)
				if objectstest.Handles(strings.TrimPrefix(r.URL.Path, "/v1")) {
					fake.ServeHTTP(w, r)
					return
				}
				mock.ServeHTTP(w, r)
			})
		}
	}
}

func sdkClient(base, key string) officialopenai.Client {
	return officialopenai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// rawCall sends one request with key and returns status and body.
func rawCall(t *testing.T, method, url, key, body string) (int, string) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, url, rd)
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func notFoundBody(id string) string {
	return `{"error":{"message":"No such object: ` + id + `","type":"invalid_request_error","param":null,"code":"not_found"}}`
}

// aObjects is what tenant acme created through the gateway.
type aObjects struct {
	file, batch, output, resp, streamed string
}

// createAsOwner makes a file, a batch over it, a stored response and a
// streamed stored response through three different instances with the
// official SDK, and checks the owner reads each back through another.
func createAsOwner(t *testing.T, bases []string) aObjects {
	t.Helper()
	ctx := context.Background()
	c0, c1, c2 := sdkClient(bases[0], acmeKey), sdkClient(bases[1%len(bases)], acmeKey), sdkClient(bases[2%len(bases)], acmeKey)
	var got aObjects

	f, err := c0.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(`{"custom_id":"1"}`+"\n"), "input.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	got.file = f.ID
	if g, err := c1.Files.Get(ctx, f.ID); err != nil || g.Filename != "input.jsonl" {
		t.Fatalf("owner's Files.Get on another instance = %+v, %v", g, err)
	}
	b, err := c2.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	got.batch, got.output = b.ID, b.OutputFileID
	if g, err := c0.Batches.Get(ctx, b.ID); err != nil || g.Status != "completed" {
		t.Fatalf("owner's Batches.Get = %+v, %v", g, err)
	}
	// The batch's output file was made by the upstream for the batch's
	// owner: the owner can download it.
	resp, err := c1.Files.Content(ctx, b.OutputFileID)
	if err != nil {
		t.Fatalf("owner's Files.Content of the batch output: %v", err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(out), `"out"`) {
		t.Fatalf("batch output content = %q", out)
	}

	r, err := c0.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("hello")}})
	if err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	got.resp = r.ID
	if g, err := c1.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || g.OutputText() != r.OutputText() {
		t.Fatalf("owner's Responses.Get = %+v, %v", g, err)
	}
	st := c2.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", PreviousResponseID: officialopenai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("and then?")}})
	var text string
	for st.Next() {
		ev := st.Current()
		if ev.Type == "response.completed" {
			got.streamed, text = ev.Response.ID, ev.Response.OutputText()
		}
	}
	if err := st.Err(); err != nil || got.streamed == "" || !strings.Contains(text, "after "+r.ID) {
		t.Fatalf("owner's streamed Responses with previous_response_id: id %q text %q err %v", got.streamed, text, err)
	}
	if _, err := c0.Responses.Get(ctx, got.streamed, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("owner's Get of the streamed response: %v", err)
	}
	return got
}

// checkOthersRefused proves that key (not the owner) gets the same 404 for
// every request naming the owner's objects as for an id that never
// existed, and that none of those requests reached the upstream.
func checkOthersRefused(t *testing.T, base, key string, a aObjects, log *pathLog) {
	t.Helper()
	before := map[string]int{}
	for _, id := range []string{a.file, a.batch, a.output, a.resp, a.streamed} {
		before[id] = log.mentioning(id)
	}
	tests := []struct {
		method, path, body, id string
	}{
		{"GET", "/v1/files/" + a.file, "", a.file},
		{"GET", "/v1/files/" + a.file + "/content", "", a.file},
		{"DELETE", "/v1/files/" + a.file, "", a.file},
		{"GET", "/v1/files/" + a.output + "/content", "", a.output},
		{"GET", "/v1/batches/" + a.batch, "", a.batch},
		{"POST", "/v1/batches/" + a.batch + "/cancel", "", a.batch},
		{"POST", "/v1/batches", `{"input_file_id":"` + a.file + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`, a.file},
		{"GET", "/v1/responses/" + a.resp, "", a.resp},
		{"DELETE", "/v1/responses/" + a.resp, "", a.resp},
		{"POST", "/v1/responses/" + a.resp + "/cancel", "", a.resp},
		{"GET", "/v1/responses/" + a.streamed + "/input_items", "", a.streamed},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","previous_response_id":"` + a.resp + `"}`, a.resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_file","file_id":"` + a.file + `"}]}]}`, a.file},
		{"POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"` + a.file + `"}}]}]}`, a.file},
		{"GET", "/v1/files/" + a.file + "?x=1", "", a.file},
		{"GET", "/v1/files/" + a.file + "/", "", a.file},
		{"GET", "/v1/FILES/" + a.file, "", a.file},
		{"GET", "/v1/files?file_id=" + a.file, "", a.file},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":[{"type":"item_reference","id":"` + a.resp + `"}]}`, a.resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","Previous_Response_ID":"` + a.resp + `"}`, a.resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","previous\u005fresponse_id":"` + a.resp + `"}`, a.resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","conversation":{"id":"` + a.resp + `"}}`, a.resp},
		{"GET", "/v1/files/" + strings.Replace(a.file, "-", "%2D", 1), "", a.file},
	}
	for _, tt := range tests {
		code, body := rawCall(t, tt.method, base+tt.path, key, tt.body)
		if code != http.StatusNotFound || body != notFoundBody(tt.id) {
			t.Errorf("%s %s as another tenant = %d %s; want 404 %s", tt.method, tt.path, code, body, notFoundBody(tt.id))
		}
		// The same request for an id nobody has is indistinguishable.
		ghost := "file-doesnotexist0000000000"
		code2, body2 := rawCall(t, tt.method, base+strings.ReplaceAll(strings.Replace(tt.path, "%2D", "-", 1), tt.id, ghost), key, strings.ReplaceAll(tt.body, tt.id, ghost))
		if code2 != code || body2 != strings.ReplaceAll(body, tt.id, ghost) {
			t.Errorf("%s %s: answer for an unknown id differs: %d %s vs %d %s", tt.method, tt.path, code2, body2, code, body)
		}
	}
	for _, p := range []string{"/v1//files/" + a.file, "/v1/files/%2F" + a.file, "/v1/files/../files/" + a.file} {
		if code, _ := rawCall(t, "GET", base+p, key, ""); code != http.StatusBadRequest && code != http.StatusNotFound {
			t.Errorf("GET %s as another tenant = %d; want 400 or 404", p, code)
		}
	}
	for id, n := range before {
		if got := log.mentioning(id); got != n {
			t.Errorf("requests naming %s reached the upstream: %d → %d", id, n, got)
		}
	}
}

// listIDs returns the ids in a list answer.
func listIDs(t *testing.T, base, path, key string) []string {
	t.Helper()
	code, body := rawCall(t, "GET", base+path, key, "")
	if code != http.StatusOK {
		t.Fatalf("GET %s = %d %s", path, code, body)
	}
	var page struct {
		Object  string                `json:"object"`
		Data    []struct{ ID string } `json:"data"`
		FirstID *string               `json:"first_id"`
		LastID  *string               `json:"last_id"`
		HasMore bool                  `json:"has_more"`
	}
	if err := json.Unmarshal([]byte(body), &page); err != nil || page.Object != "list" {
		t.Fatalf("list %s = %s (%v)", path, body, err)
	}
	var ids []string
	for _, d := range page.Data {
		ids = append(ids, d.ID)
	}
	if len(ids) > 0 && (page.FirstID == nil || *page.FirstID != ids[0] || page.LastID == nil || *page.LastID != ids[len(ids)-1]) {
		t.Errorf("list %s: first_id/last_id do not match the data: %s", path, body)
	}
	return ids
}

func TestStoredObjectsStayTheirOwners(t *testing.T) {
	rs := redistest.Start(t)
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, func(o *harnessOptions) { o.redis, o.instances = rs, 3 }, objectTenants, withObjectUpstream(fake, log))
	a := createAsOwner(t, h.bases())
	direct := fake.Direct("made-outside.jsonl")

	for i, base := range h.bases() {
		checkOthersRefused(t, base, betaKey, a, log)
		// An object created at the upstream directly is nobody's.
		for _, key := range []string{acmeKey, betaKey} {
			if code, body := rawCall(t, "GET", base+"/v1/files/"+direct, key, ""); code != 404 || body != notFoundBody(direct) {
				t.Errorf("instance %d: direct object as %s = %d %s", i, key, code, body)
			}
		}
	}
	if n := log.mentioning(direct); n != 0 {
		t.Errorf("requests for the direct object reached the upstream %d times", n)
	}

	// Lists: each tenant sees only its own objects.
	if ids := listIDs(t, h.bases()[1], "/v1/files", betaKey); len(ids) != 0 {
		t.Errorf("beta's file list = %v; want none", ids)
	}
	if ids := listIDs(t, h.bases()[1], "/v1/batches", betaKey); len(ids) != 0 {
		t.Errorf("beta's batch list = %v; want none", ids)
	}
	if ids := listIDs(t, h.bases()[2], "/v1/files", acmeKey); strings.Join(ids, ",") != a.file+","+a.output {
		t.Errorf("acme's file list = %v; want %s,%s (not the direct one)", ids, a.file, a.output)
	}
	// The SDK's auto-pager over a filtered list with a small page.
	pc := sdkClient(h.bases()[0], acmeKey)
	pager := pc.Files.ListAutoPaging(context.Background(), officialopenai.FileListParams{Limit: officialopenai.Int(1)})
	var paged []string
	for pager.Next() {
		paged = append(paged, pager.Current().ID)
	}
	if err := pager.Err(); err != nil || strings.Join(paged, ",") != a.file+","+a.output {
		t.Errorf("acme's auto-paged files = %v, %v", paged, err)
	}

	// Every instance restarts: ownership is in Redis.
	h2 := newHarness(t, func(o *harnessOptions) { o.redis, o.instances = rs, 3 }, objectTenants, withObjectUpstream(fake, log))
	for _, base := range h2.bases() {
		if code, body := rawCall(t, "GET", base+"/v1/files/"+a.file, acmeKey, ""); code != 200 {
			t.Errorf("after restart, the owner's GET = %d %s", code, body)
		}
		checkOthersRefused(t, base, betaKey, a, log)
	}

	// A delete through Corral removes the record with the object.
	dc := sdkClient(h2.bases()[0], acmeKey)
	if err := dc.Responses.Delete(context.Background(), a.resp); err != nil {
		t.Fatalf("owner's delete: %v", err)
	}
	n := log.mentioning(a.resp)
	if code, body := rawCall(t, "GET", h2.bases()[1]+"/v1/responses/"+a.resp, acmeKey, ""); code != 404 || body != notFoundBody(a.resp) {
		t.Errorf("after delete, the owner's GET = %d %s; want Corral's 404", code, body)
	}
	if log.mentioning(a.resp) != n {
		t.Error("a request for a deleted object was forwarded")
	}
}

func TestStoredObjectsDenied(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	denied := `{"error":{"message":"Stored objects (files, batches, stored responses, ...) are disabled for this API key.","type":"invalid_request_error","param":null,"code":"stored_objects_disabled"}}`
	tests := []struct{ method, path, body string }{
		{"GET", "/v1/files", ""},
		{"GET", "/v1/files/file-x", ""},
		{"DELETE", "/v1/batches/batch_x", ""},
		{"POST", "/v1/batches", `{"input_file_id":"file-x","endpoint":"/v1/chat/completions","completion_window":"24h"}`},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi"}`},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","store":true}`},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","store":false,"previous_response_id":"resp_x"}`},
		{"POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"store":true}`},
		{"GET", "/v1/chat/completions", ""},
	}
	for _, tt := range tests {
		if code, body := rawCall(t, tt.method, h.gw.URL+tt.path, deniedKey, tt.body); code != 403 || body != denied {
			t.Errorf("%s %s %s as a deny tenant = %d %s", tt.method, tt.path, tt.body, code, body)
		}
	}
	calls := len(fake.Calls())
	if calls != 0 {
		t.Errorf("refused requests reached the upstream: %v", fake.Calls())
	}
	// What stores nothing still works.
	if code, body := rawCall(t, "POST", h.gw.URL+"/v1/responses", deniedKey, `{"model":"gpt-4o-mini","input":"hi","store":false}`); code != 200 {
		t.Errorf("store:false response as a deny tenant = %d %s", code, body)
	}
	if code, body := rawCall(t, "POST", h.gw.URL+"/v1/chat/completions", deniedKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
		t.Errorf("chat without store as a deny tenant = %d %s", code, body)
	}
}

func TestStoredChatCompletionIsTheCallers(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"remember me"}],"store":true}`
	ids := map[string]bool{}
	for i, stream := range []bool{false, false, true} { // MISS, then HIT, then a streamed HIT
		b := body
		if stream {
			b = strings.Replace(body, `"store":true`, `"store":true,"stream":true`, 1)
		}
		code, out := rawCall(t, "POST", h.gw.URL+"/v1/chat/completions", acmeKey, b)
		if code != 200 {
			t.Fatalf("call %d = %d %s", i, code, out)
		}
		if i < 2 {
			var c struct{ ID string }
			_ = json.Unmarshal([]byte(out), &c)
			ids[c.ID] = true
		}
	}
	if len(ids) != 1 {
		t.Fatalf("completion ids = %v; want the one stored completion", ids)
	}
	var id string
	for k := range ids {
		id = k
	}
	if code, out := rawCall(t, "GET", h.gw.URL+"/v1/chat/completions/"+id, betaKey, ""); code != 404 || out != notFoundBody(id) {
		t.Errorf("another tenant's GET of the stored completion = %d %s", code, out)
	}
	if n := log.mentioning("/chat/completions/" + id); n != 0 {
		t.Errorf("another tenant's GET reached the upstream")
	}
	// The owner's GET is forwarded (the mock model has no stored
	// completions; what matters is that it went through).
	rawCall(t, "GET", h.gw.URL+"/v1/chat/completions/"+id, acmeKey, "")
	if n := log.mentioning("/chat/completions/" + id); n != 1 {
		t.Errorf("the owner's GET reached the upstream %d times; want 1", n)
	}
}

func TestAdminAssignsObjects(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		o.server = func(so *Options) { so.AdminToken = "adm" }
	})
	direct := fake.Direct("legacy.jsonl")
	admin := func(method, path, body string) (int, string) { return rawCall(t, method, h.gw.URL+path, "adm", body) }
	if code, _ := rawCall(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 404 {
		t.Fatalf("before assignment: %d", code)
	}
	if code, body := admin("PUT", "/admin/tenants/beta/objects/"+direct, ""); code != 200 {
		t.Fatalf("assign = %d %s", code, body)
	}
	if code, body := rawCall(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 200 || !strings.Contains(body, direct) {
		t.Errorf("after assignment, beta's GET = %d %s", code, body)
	}
	if code, _ := rawCall(t, "GET", h.gw.URL+"/v1/files/"+direct, acmeKey, ""); code != 404 {
		t.Errorf("after assignment to beta, acme's GET = %d", code)
	}
	tests := []struct {
		method, path, body string
		want               int
	}{
		{"PUT", "/admin/tenants/nobody/objects/x", "", 404},
		{"PUT", "/admin/tenants/beta/objects/x", `{"upstream":"elsewhere"}`, 400},
		{"PUT", "/admin/tenants/beta/objects/x", `{"bogus":1}`, 400},
		{"DELETE", "/admin/tenants/acme/objects/" + direct, "", 404}, // not acme's
	}
	for _, tt := range tests {
		if code, body := admin(tt.method, tt.path, tt.body); code != tt.want {
			t.Errorf("%s %s %s = %d %s; want %d", tt.method, tt.path, tt.body, code, body, tt.want)
		}
	}
	if code, body := admin("DELETE", "/admin/tenants/beta/objects/"+direct, ""); code != 200 {
		t.Fatalf("unassign = %d %s", code, body)
	}
	if code, _ := rawCall(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 404 {
		t.Errorf("after unassignment, beta's GET = %d", code)
	}
	if code, _ := rawCall(t, "PUT", h.gw.URL+"/admin/tenants/beta/objects/"+direct, betaKey, ""); code != 401 {
		t.Errorf("assignment with a tenant key = %d; want 401", code)
	}
}

// TestUploadsAreStreamed proves a multipart upload reaches the upstream
// while the client is still sending it: the client holds back the end of
// its body until the upstream has seen the beginning, which could never
// happen if the gateway buffered the body first.
func TestUploadsAreStreamed(t *testing.T) {
	started := make(chan struct{})
	var once sync.Once
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, func(o *harnessOptions) {
		withObjectUpstream(fake, log)(o)
		inner := o.wrapUpstream
		o.wrapUpstream = func(mock http.Handler) http.Handler {
			next := inner(mock)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/files" && r.Method == http.MethodPost {
					r.Body = &signalOnRead{ReadCloser: r.Body, fn: func() { once.Do(func() { close(started) }) }}
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		_ = mw.WriteField("purpose", "batch")
		part, _ := mw.CreateFormFile("file", "big.jsonl")
		_, _ = part.Write(bytes.Repeat([]byte(`{"custom_id":"x"}`+"\n"), 4096))
		select {
		case <-started:
		case <-time.After(10 * time.Second):
			pw.CloseWithError(fmt.Errorf("the upstream saw nothing while the upload was open"))
			return
		}
		_, _ = part.Write([]byte(`{"custom_id":"last"}` + "\n"))
		_ = mw.Close()
		_ = pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/files", pr)
	req.Header.Set("Authorization", "Bearer "+acmeKey)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var f struct {
		ID    string `json:"id"`
		Bytes int    `json:"bytes"`
	}
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &f); err != nil || resp.StatusCode != 200 || f.Bytes != 4096*18+21 {
		t.Fatalf("streamed upload = %d %s", resp.StatusCode, b)
	}
	if code, _ := rawCall(t, "GET", h.gw.URL+"/v1/files/"+f.ID, acmeKey, ""); code != 200 {
		t.Errorf("the streamed upload was not recorded for its owner: %d", code)
	}
	if code, _ := rawCall(t, "GET", h.gw.URL+"/v1/files/"+f.ID, betaKey, ""); code != 404 {
		t.Errorf("another tenant reads the streamed upload: %d", code)
	}
}

// signalOnRead calls fn on the first read that returns bytes.
type signalOnRead struct {
	io.ReadCloser
	fn func()
}

func (s *signalOnRead) Read(p []byte) (int, error) {
	n, err := s.ReadCloser.Read(p)
	if n > 0 {
		s.fn()
	}
	return n, err
}

func TestProxyRefusesBodiesItCannotCheck(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	req, _ := http.NewRequest("POST", h.gw.URL+"/v1/responses", strings.NewReader("compressed"))
	req.Header.Set("Authorization", "Bearer "+betaKey)
	req.Header.Set("Content-Encoding", "gzip")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("a compressed body = %d; want 415", resp.StatusCode)
	}
	if code, _ := rawCall(t, "POST", h.gw.URL+"/v1/responses", betaKey, `{"model":"m","previous_response_id":"resp_x"} trailing`); code != 400 {
		t.Errorf("JSON with trailing data = %d; want 400", code)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("refused bodies reached the upstream: %v", fake.Calls())
	}
}
