package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"

	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/redistest"
)

// The adversarial review of issue 11: ways a second tenant could get
// past the ownership check, each refused before anything is forwarded.

// sendRaw sends one request with the headers given (values in order) and
// returns status and body.
func sendRaw(t *testing.T, method, url, key, body string, header map[string][]string) (int, string) {
	t.Helper()
	req := objectstest.NewRequest(t, method, url, key, body)
	for k, vv := range header {
		for _, v := range vv {
			req.Header.Add(k, v)
		}
	}
	return objectstest.Do(t, req)
}

func (l *pathLog) count() int { l.mu.Lock(); defer l.mu.Unlock(); return len(l.paths) }

func (l *pathLog) since(n int) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.paths[n:]...)
}

func newFile(t *testing.T, base, key, name string) string {
	t.Helper()
	c := objectstest.SDK(base, key)
	f, err := c.Files.New(context.Background(), officialopenai.FileNewParams{
		File: officialopenai.File(strings.NewReader("{}\n"), name, "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	return f.ID
}

// TestReviewRequestsThatHideReferences: each request names acme's
// response or file in a way an upstream (or a proxy before it) may read
// although Corral's first reading did not. All are refused unforwarded.
func TestObjectsRequestsThatHideReferences(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	a := newFile(t, h.gw.URL, acmeKey, "a.jsonl")
	b := newFile(t, h.gw.URL, betaKey, "b.jsonl")
	json := map[string][]string{"Content-Type": {"application/json"}}
	tests := []struct {
		name, method, path, body string
		header                   map[string][]string
		want                     int
	}{
		// Content-Encoding: Corral read only the first header; the
		// upstream gets both and may inflate a body Corral never read.
		{"second Content-Encoding", "POST", "/v1/responses", "x\x01\x02",
			map[string][]string{"Content-Encoding": {"identity", "deflate"}, "Content-Type": {"application/json"}}, 415},
		// Two Content-Types: Corral sniffs JSON from the first, an
		// upstream may take the second and parse a form.
		{"second Content-Type", "POST", "/v1/responses", `previous_response_id=` + a,
			map[string][]string{"Content-Type": {"application/json", "application/x-www-form-urlencoded"}}, 400},
		// A JSON body labelled as a form: many upstreams decode JSON
		// whatever the label says.
		{"JSON labelled as a form", "POST", "/v1/responses", `{"model":"gpt-4o-mini","input":[{"type":"input_file","file_id":"` + a + `"}]}`,
			map[string][]string{"Content-Type": {"application/x-www-form-urlencoded"}}, 404},
		// A Content-Type Go cannot parse (a duplicate parameter with another value) made
		// Corral skip the body; an upstream takes the first boundary.
		{"unparseable Content-Type", "POST", "/v1/responses",
			"--XX\r\nContent-Disposition: form-data; name=\"previous_response_id\"\r\n\r\n" + a + "\r\n--XX--\r\n",
			map[string][]string{"Content-Type": {"multipart/form-data; boundary=XX; boundary=YY"}}, 400},
		// Go drops a query pair with ';' in it; servers that split on
		// ';' read file_id.
		{"semicolon query", "POST", "/v1/responses?x=1;file_id=" + a, `{"model":"gpt-4o-mini","input":"hi"}`, json, 400},
		// Past Go's query parameter limit, URL.Query() is empty: nothing
		// in it was checked, and the upstream reads all of it.
		{"query past Go's parameter limit", "POST", "/v1/responses?" + strings.Repeat("a=1&", 10_001) + "file_id=" + a, `{"model":"gpt-4o-mini","input":"hi"}`, json, 400},
		// U+017F folds to 's' in case-insensitive decoders (encoding/json).
		{"folded key", "POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","previou` + "\u017f" + `_response_id":"` + a + `"}`, json, 404},
		// "..;" is ".." to servers that strip path parameters: beta's
		// own file passes the check, the upstream serves acme's.
		{"dot-dot with a parameter", "GET", "/v1/files/" + b + "/..;/" + a, "", nil, 400},
	}
	for _, tt := range tests {
		before := log.count()
		code, body := sendRaw(t, tt.method, h.gw.URL+tt.path, betaKey, tt.body, tt.header)
		if code != tt.want {
			t.Errorf("%s: %s %s = %d %s; want %d", tt.name, tt.method, tt.path, code, body, tt.want)
		}
		if n := log.count(); n != before {
			t.Errorf("%s: forwarded: %v", tt.name, log.since(before))
		}
	}
}

// TestReviewListCursorsAreTheCallers: a list's after= cursor set to
// another tenant's id told whether that id exists and where it sits
// among the caller's own objects (the upstream pages from it).
func TestObjectsListCursorsAreTheCallers(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	b1 := newFile(t, h.gw.URL, betaKey, "b1.jsonl")
	a := newFile(t, h.gw.URL, acmeKey, "a.jsonl")
	b2 := newFile(t, h.gw.URL, betaKey, "b2.jsonl")
	ghost := "file-doesnotexist0000000000"

	codeA, bodyA := objectstest.Call(t, "GET", h.gw.URL+"/v1/files?after="+a, betaKey, "")
	codeG, bodyG := objectstest.Call(t, "GET", h.gw.URL+"/v1/files?after="+ghost, betaKey, "")
	if codeA != http.StatusNotFound || bodyA != objectstest.NotFoundBody(a) {
		t.Errorf("beta's list after acme's file = %d %s; want 404", codeA, bodyA)
	}
	if codeG != codeA || bodyG != strings.ReplaceAll(bodyA, a, ghost) {
		t.Errorf("after= another tenant's id (%d %s) and after= an unknown id (%d %s) differ", codeA, bodyA, codeG, bodyG)
	}
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/files?before="+a, betaKey, ""); code != http.StatusNotFound {
		t.Errorf("beta's list before acme's file = %d; want 404", code)
	}
	if log.mentioning(a) != 0 {
		t.Errorf("a cursor naming acme's file reached the upstream: %v", log.since(0))
	}
	// The caller's own cursor pages as before.
	if ids := objectstest.ListIDs(t, h.gw.URL, "/v1/files?after="+b1, betaKey); strings.Join(ids, ",") != b2 {
		t.Errorf("beta's list after its own file = %v; want %s", ids, b2)
	}
}

// TestReviewEvalsOverStoredObjectsRefused: an eval whose data source is
// "stored completions" or "stored responses" makes the upstream select
// every stored completion or response in the shared account by filter,
// other tenants' included, and its output items show their inputs and
// outputs. No id is named, so the id check alone lets it through.
func TestObjectsEvalsOverStoredObjectsRefused(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		o.server = func(so *Options) { so.AdminToken = "adm" }
	})
	// beta owns an eval (assigned by the operator here; made with
	// POST /v1/evals in real life).
	if code, body := objectstest.Call(t, "PUT", h.gw.URL+"/admin/tenants/beta/objects/eval_beta", "adm", ""); code != 200 {
		t.Fatalf("assign = %d %s", code, body)
	}
	tests := []struct{ path, body string }{
		{"/v1/evals", `{"name":"x","data_source_config":{"type":"stored_completions","metadata":{}},"testing_criteria":[]}`},
		{"/v1/evals", `{"name":"x","data_source_config":{"type":"logs"},"testing_criteria":[]}`},
		{"/v1/evals/eval_beta/runs", `{"data_source":{"type":"completions","source":{"type":"stored_completions","limit":100}}}`},
		{"/v1/evals/eval_beta/runs", `{"data_source":{"type":"responses","source":{"type":"responses","created_after":0}}}`},
	}
	for _, tt := range tests {
		before := log.count()
		code, body := objectstest.Call(t, "POST", h.gw.URL+tt.path, betaKey, tt.body)
		if code != http.StatusBadRequest || !strings.Contains(body, "unsupported_data_source") {
			t.Errorf("POST %s %s = %d %s; want 400 unsupported_data_source", tt.path, tt.body, code, body)
		}
		if n := log.count(); n != before {
			t.Errorf("POST %s: forwarded: %v", tt.path, log.since(before))
		}
	}
	// A run over another tenant's file (source {"type":"file_id","id":...}).
	a := newFile(t, h.gw.URL, acmeKey, "a.jsonl")
	if code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/evals/eval_beta/runs", betaKey, `{"data_source":{"type":"jsonl","source":{"type":"file_id","id":"`+a+`"}}}`); code != http.StatusNotFound || body != objectstest.NotFoundBody(a) {
		t.Errorf("beta's eval run over acme's file = %d %s; want 404", code, body)
	}
	if log.mentioning(a) != 0 {
		t.Errorf("forwarded: %v", log.since(0))
	}
	// A file-backed run is still forwarded.
	before := log.count()
	objectstest.Call(t, "POST", h.gw.URL+"/v1/evals/eval_beta/runs", betaKey, `{"data_source":{"type":"jsonl","source":{"type":"file_content","content":[]}}}`)
	if log.count() == before {
		t.Error("a run over the caller's own data was not forwarded")
	}
}

// TestReviewStoredContentCannotClaimObjects: answers on an owned object's
// paths were read for the objects "the upstream made on the owner's
// behalf" whatever they were. Content a tenant stored and reads back as
// JSON (a container file served as application/json) could name any id
// in that shape (an upload's file, a batch's output file) and Corral
// recorded it as the reader's: a way to claim objects nobody owns yet
// (made before Corral, or a batch output its owner has not polled).
func TestObjectsStoredContentCannotClaimObjects(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	direct := fake.Direct("legacy.jsonl") // nobody's
	content := `{"object":"upload","id":"upload_x","file":{"id":"` + direct + `"}}`
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		inner := o.wrapUpstream
		o.wrapUpstream = func(mock http.Handler) http.Handler {
			next := inner(mock)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/v1/containers/cntr_beta/files/cfile_1/content" {
					log.add(r.Method + " " + r.URL.String())
					w.Header().Set("Content-Type", "application/json") // the file is beta's output.json
					_, _ = io.WriteString(w, content)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		o.server = func(so *Options) { so.AdminToken = "adm" }
	})
	if code, body := objectstest.Call(t, "PUT", h.gw.URL+"/admin/tenants/beta/objects/cntr_beta", "adm", ""); code != 200 {
		t.Fatalf("assign = %d %s", code, body)
	}
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/containers/cntr_beta/files/cfile_1/content", betaKey, ""); code != 200 || body != content {
		t.Fatalf("beta reads its own container file = %d %s", code, body)
	}
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+direct, betaKey, ""); code != http.StatusNotFound {
		t.Errorf("after reading content that names it, beta's GET of a file nobody owns = %d %s; want 404", code, body)
	}
}

// TestReviewManyIDsAreRefusedCheaply: one 8 MiB body can name over a
// million distinct ids; each became a pipelined Redis GET (a command
// object each, the whole pipeline held at once) before the first unknown
// id was refused. A request naming more ids than any API takes is
// refused before any lookup.
func TestObjectsManyIDsAreRefusedCheaply(t *testing.T) {
	rs := redistest.Start(t)
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, func(o *harnessOptions) { o.redis = rs }, objectTenants, withObjectUpstream(fake, log))
	var b strings.Builder
	b.WriteString(`{"model":"gpt-4o-mini","input":"hi","tools":[{"type":"file_search","vector_store_ids":[`)
	for i := 0; i < 300_000; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"v%d"`, i)
	}
	b.WriteString(`]}]}`)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/responses", betaKey, b.String())
	runtime.ReadMemStats(&after)
	if code != http.StatusBadRequest {
		t.Errorf("a body naming 300,000 ids = %d %.200s; want 400", code, body)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 64<<20 {
		t.Errorf("refusing it allocated %d MiB", alloc>>20)
	}
	if log.count() != 0 {
		t.Errorf("forwarded: %v", log.since(0))
	}
}

// TestReviewChatKitThreadsAreNobodys: ChatKit threads hold conversations
// and GET /v1/chatkit/threads lists every thread of the project; through
// the shared key any tenant read them all.
func TestObjectsChatKitThreadsAreNobodys(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	for _, p := range []string{"/v1/chatkit/threads/cthr_acme", "/v1/chatkit/threads/cthr_acme/items"} {
		if code, body := objectstest.Call(t, "GET", h.gw.URL+p, betaKey, ""); code != http.StatusNotFound || body != objectstest.NotFoundBody("cthr_acme") {
			t.Errorf("GET %s = %d %s; want 404", p, code, body)
		}
	}
	if code, _ := objectstest.Call(t, "DELETE", h.gw.URL+"/v1/chatkit/threads/cthr_acme", betaKey, ""); code != http.StatusNotFound {
		t.Errorf("DELETE = %d; want 404", code)
	}
	if log.mentioning("cthr_acme") != 0 {
		t.Errorf("forwarded: %v", log.since(0))
	}
}
