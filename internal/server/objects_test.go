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
		tenant.Spec{ID: "beta", KeySHA256: []string{tenant.HashKey(betaKey)}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: true}},
		tenant.Spec{ID: "denied", KeySHA256: []string{tenant.HashKey(deniedKey)}, Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: true, DenyObjects: true}},
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

func TestStoredObjectsStayTheirOwners(t *testing.T) {
	rs := redistest.Start(t)
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, func(o *harnessOptions) { o.redis, o.instances = rs, 3 }, objectTenants, withObjectUpstream(fake, log))
	a := objectstest.CreateAsOwner(t, h.bases(), acmeKey)
	direct := fake.Direct("made-outside.jsonl")

	for i, base := range h.bases() {
		objectstest.CheckOthersRefused(t, base, betaKey, a, log.mentioning)
		// An object created at the upstream directly is nobody's.
		for _, key := range []string{acmeKey, betaKey} {
			if code, body := objectstest.Call(t, "GET", base+"/v1/files/"+direct, key, ""); code != 404 || body != objectstest.NotFoundBody(direct) {
				t.Errorf("instance %d: direct object as %s = %d %s", i, key, code, body)
			}
		}
	}
	if n := log.mentioning(direct); n != 0 {
		t.Errorf("requests for the direct object reached the upstream %d times", n)
	}

	// Lists: each tenant sees only its own objects.
	if ids := objectstest.ListIDs(t, h.bases()[1], "/v1/files", betaKey); len(ids) != 0 {
		t.Errorf("beta's file list = %v; want none", ids)
	}
	if ids := objectstest.ListIDs(t, h.bases()[1], "/v1/batches", betaKey); len(ids) != 0 {
		t.Errorf("beta's batch list = %v; want none", ids)
	}
	if ids := objectstest.ListIDs(t, h.bases()[2], "/v1/files", acmeKey); strings.Join(ids, ",") != a.File+","+a.Output {
		t.Errorf("acme's file list = %v; want %s,%s (not the direct one)", ids, a.File, a.Output)
	}
	// The SDK's auto-pager over a filtered list with a small page.
	pc := objectstest.SDK(h.bases()[0], acmeKey)
	pager := pc.Files.ListAutoPaging(context.Background(), officialopenai.FileListParams{Limit: officialopenai.Int(1)})
	var paged []string
	for pager.Next() {
		paged = append(paged, pager.Current().ID)
	}
	if err := pager.Err(); err != nil || strings.Join(paged, ",") != a.File+","+a.Output {
		t.Errorf("acme's auto-paged files = %v, %v", paged, err)
	}

	// Every instance restarts: ownership is in Redis.
	h2 := newHarness(t, func(o *harnessOptions) { o.redis, o.instances = rs, 3 }, objectTenants, withObjectUpstream(fake, log))
	for _, base := range h2.bases() {
		if code, body := objectstest.Call(t, "GET", base+"/v1/files/"+a.File, acmeKey, ""); code != 200 {
			t.Errorf("after restart, the owner's GET = %d %s", code, body)
		}
		objectstest.CheckOthersRefused(t, base, betaKey, a, log.mentioning)
	}

	// A delete through Corral removes the record with the object.
	dc := objectstest.SDK(h2.bases()[0], acmeKey)
	if err := dc.Responses.Delete(context.Background(), a.Resp); err != nil {
		t.Fatalf("owner's delete: %v", err)
	}
	n := log.mentioning(a.Resp)
	if code, body := objectstest.Call(t, "GET", h2.bases()[1]+"/v1/responses/"+a.Resp, acmeKey, ""); code != 404 || body != objectstest.NotFoundBody(a.Resp) {
		t.Errorf("after delete, the owner's GET = %d %s; want Corral's 404", code, body)
	}
	if log.mentioning(a.Resp) != n {
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
		if code, body := objectstest.Call(t, tt.method, h.gw.URL+tt.path, deniedKey, tt.body); code != 403 || body != denied {
			t.Errorf("%s %s %s as a deny tenant = %d %s", tt.method, tt.path, tt.body, code, body)
		}
	}
	calls := len(fake.Calls())
	if calls != 0 {
		t.Errorf("refused requests reached the upstream: %v", fake.Calls())
	}
	// What stores nothing still works.
	if code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/responses", deniedKey, `{"model":"gpt-4o-mini","input":"hi","store":false}`); code != 200 {
		t.Errorf("store:false response as a deny tenant = %d %s", code, body)
	}
	if code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/chat/completions", deniedKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`); code != 200 {
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
		code, out := objectstest.Call(t, "POST", h.gw.URL+"/v1/chat/completions", acmeKey, b)
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
	if code, out := objectstest.Call(t, "GET", h.gw.URL+"/v1/chat/completions/"+id, betaKey, ""); code != 404 || out != objectstest.NotFoundBody(id) {
		t.Errorf("another tenant's GET of the stored completion = %d %s", code, out)
	}
	if n := log.mentioning("/chat/completions/" + id); n != 0 {
		t.Errorf("another tenant's GET reached the upstream")
	}
	// The owner's GET is forwarded (the mock model has no stored
	// completions; what matters is that it went through).
	objectstest.Call(t, "GET", h.gw.URL+"/v1/chat/completions/"+id, acmeKey, "")
	if n := log.mentioning("/chat/completions/" + id); n != 1 {
		t.Errorf("the owner's GET reached the upstream %d times; want 1", n)
	}
}

// TestChatStoreIsInTheKey: a chat completion stored (store: true) is not
// the answer to the same prompt unstored, so store: true after a
// store: false answer makes its own upstream call, and its id is the
// caller's (issue 26, point 13).
func TestChatStoreIsInTheKey(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	unstored := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"keep me"}],"store":false}`
	stored := strings.Replace(unstored, `"store":false`, `"store":true`, 1)
	for i, tt := range []struct{ body, want string }{{unstored, cacheMiss}, {stored, cacheMiss}, {stored, cacheHit}} {
		a := sendTo(context.Background(), h.gw.URL+"/v1/chat/completions", acmeKey, tt.body)
		if a.status != 200 || a.header.Get("X-Corral-Cache") != tt.want {
			t.Fatalf("call %d (%s) = %d %s; want %s", i, tt.body, a.status, a.header.Get("X-Corral-Cache"), tt.want)
		}
	}
	if n := log.mentioning(`"store":true`); n != 1 {
		t.Errorf("store:true reached the upstream %d times; want once", n)
	}
	if n := h.mock.Stats().Paths["/v1/chat/completions"]; n != 2 {
		t.Errorf("upstream chat calls = %d; want 2", n)
	}
	var c struct{ ID string }
	_, out := objectstest.Call(t, "POST", h.gw.URL+"/v1/chat/completions", acmeKey, stored)
	if err := json.Unmarshal([]byte(out), &c); err != nil || c.ID == "" {
		t.Fatalf("stored completion %q: %v", out, err)
	}
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/chat/completions/"+c.ID, betaKey, ""); code != 404 || body != objectstest.NotFoundBody(c.ID) {
		t.Errorf("another tenant's GET of the stored completion = %d %s", code, body)
	}
	objectstest.Call(t, "GET", h.gw.URL+"/v1/chat/completions/"+c.ID, acmeKey, "")
	if n := log.mentioning("/chat/completions/" + c.ID); n != 1 {
		t.Errorf("the owner's GET reached the upstream %d times; want 1", n)
	}
}

func TestAdminAssignsObjects(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		o.server = func(so *Options) { so.AdminToken = "adm" }
	})
	direct := fake.Direct("legacy.jsonl")
	admin := func(method, path, body string) (int, string) {
		return objectstest.Call(t, method, h.gw.URL+path, "adm", body)
	}
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 404 {
		t.Fatalf("before assignment: %d", code)
	}
	if code, body := admin("PUT", "/admin/tenants/beta/objects/"+direct, ""); code != 200 {
		t.Fatalf("assign = %d %s", code, body)
	}
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 200 || !strings.Contains(body, direct) {
		t.Errorf("after assignment, beta's GET = %d %s", code, body)
	}
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+direct, acmeKey, ""); code != 404 {
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
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != 404 {
		t.Errorf("after unassignment, beta's GET = %d", code)
	}
	if code, _ := objectstest.Call(t, "PUT", h.gw.URL+"/admin/tenants/beta/objects/"+direct, betaKey, ""); code != 401 {
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
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+f.ID, acmeKey, ""); code != 200 {
		t.Errorf("the streamed upload was not recorded for its owner: %d", code)
	}
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+f.ID, betaKey, ""); code != 404 {
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
	if code, _ := objectstest.Call(t, "POST", h.gw.URL+"/v1/responses", betaKey, `{"model":"m","previous_response_id":"resp_x"} trailing`); code != 400 {
		t.Errorf("JSON with trailing data = %d; want 400", code)
	}
	if n := len(fake.Calls()); n != 0 {
		t.Errorf("refused bodies reached the upstream: %v", fake.Calls())
	}
}
