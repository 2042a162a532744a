package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"

	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestEncodedPathIsTheCachedEndpoint: a percent-encoded spelling of a
// cached endpoint reaches the upstream as that endpoint, so it is that
// endpoint: the same prompt twice is one upstream call and a HIT
// (issue 26, point 2).
func TestEncodedPathIsTheCachedEndpoint(t *testing.T) {
	h := newHarness(t, withAnthropic)
	ctx := context.Background()
	bearer := []string{"Authorization", "Bearer " + acmeKey}
	tests := []struct {
		path, body string
		hdr        []string
	}{
		{"/v1/chat/%63ompletions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"encoded chat"}]}`, bearer},
		{"/v1/%63hat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"encoded chat 2"}]}`, bearer},
		{"/v1/re%73ponses", `{"model":"gpt-4o-mini","input":"encoded responses","store":false}`, bearer},
		{"/v1/me%73sages", `{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"encoded messages"}]}`, []string{"X-Api-Key", acmeKey}},
	}
	for _, tt := range tests {
		before := h.mock.Stats().Requests
		first := sendWith(ctx, h.gw.URL+tt.path, tt.body, tt.hdr...)
		second := sendWith(ctx, h.gw.URL+tt.path, tt.body, tt.hdr...)
		if first.status != 200 || first.header.Get("X-Corral-Cache") != cacheMiss {
			t.Errorf("%s first: %d %q %s; want a MISS", tt.path, first.status, first.header.Get("X-Corral-Cache"), first.body)
		}
		if second.status != 200 || second.header.Get("X-Corral-Cache") != cacheHit {
			t.Errorf("%s second: %d %q; want a HIT", tt.path, second.status, second.header.Get("X-Corral-Cache"))
		}
		if n := h.mock.Stats().Requests - before; n != 1 {
			t.Errorf("%s: upstream calls = %d; want 1", tt.path, n)
		}
	}
	// The plain spelling is the same entry.
	plain := sendWith(ctx, h.gw.URL+"/v1/chat/completions", tests[0].body, bearer...)
	if plain.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("plain path after the encoded one: %q; want a HIT", plain.header.Get("X-Corral-Cache"))
	}
}

// TestEncodedPathKeepsTokensPerMinute: three 900-token requests at 1,000
// tokens/min are one 200 and two 429s on the encoded path as on the plain
// one (issue 26, point 2: the encoded path was 200 three times).
func TestEncodedPathKeepsTokensPerMinute(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm-plain", "sk-tpm-plain", 0, 1000), limitedTenant("tpm-encoded", "sk-tpm-encoded", 0, 1000)}
	})
	ctx := context.Background()
	for _, tt := range []struct{ path, key string }{{"/v1/chat/completions", "sk-tpm-plain"}, {"/v1/chat/%63ompletions", "sk-tpm-encoded"}} {
		var got []int
		for i := range 3 {
			// About 25 tokens of body and 875 of max_tokens: 900.
			body := fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":875,"messages":[{"role":"user","content":"prompt %d"}]}`, i)
			got = append(got, sendTo(ctx, h.gw.URL+tt.path, tt.key, body).status)
		}
		if fmt.Sprint(got) != "[200 429 429]" {
			t.Errorf("%s: statuses %v; want [200 429 429]", tt.path, got)
		}
	}
	if n := h.mock.Stats().Requests; n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
}

// TestAmbiguousPathsAreRefused: a path whose decoding could read
// differently to a server on the way (an encoded slash, dot, backslash,
// percent sign or NUL, an invalid escape) is a 400 in the API's shape,
// never forwarded.
func TestAmbiguousPathsAreRefused(t *testing.T) {
	h := newHarness(t, withAnthropic)
	openAIBad := `{"error":{"message":"` + errBadPath.Message + `","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`
	anthropicBad := `{"type":"error","error":{"type":"invalid_request_error","message":"` + errBadPath.Message + `"}}`
	tests := []struct {
		method, path, want string
	}{
		{"POST", "/v1/chat%2Fcompletions", openAIBad},
		{"POST", "/v1/chat/completions%2e", openAIBad},
		{"GET", "/v1/files/%2e%2e/batches", openAIBad},
		{"GET", "/v1/files/file-a%00b", openAIBad},
		{"GET", "/v1/files/file-a%25b", openAIBad},
		{"GET", "/v1/files/file-a%5Cb", openAIBad},
		{"GET", "/v1/files/file-a%0Ab", openAIBad},
		{"POST", "/v1/me%73sages%2Fbatches", anthropicBad},
	}
	for _, tt := range tests {
		req := objectstest.NewRequest(t, tt.method, h.gw.URL+tt.path, acmeKey, "")
		req.URL.Opaque = tt.path // sent as written
		req.Header.Set("X-Api-Key", acmeKey)
		if code, body := objectstest.Do(t, req); code != 400 || body != tt.want {
			t.Errorf("%s %s = %d %s; want 400 %s", tt.method, tt.path, code, body, tt.want)
		}
	}
	// An escape that is not one Go's server refuses itself, before Corral.
	req := objectstest.NewRequest(t, "GET", h.gw.URL+"/v1/files/x", acmeKey, "")
	req.URL.Opaque = "/v1/files/%zz"
	if code, _ := objectstest.Do(t, req); code != 400 {
		t.Errorf("GET /v1/files/%%zz = %d; want 400", code)
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("ambiguous paths reached the upstream %d times", n)
	}
}

// lenientFront is what may sit in front of an upstream: a server that
// drops path parameters (";x", as Tomcat and Spring do) and runs the
// method X-HTTP-Method-Override names (as many frameworks do). It counts
// the overrides it saw.
type lenientFront struct {
	mu        sync.Mutex // protects overrides
	overrides int
}

func (f *lenientFront) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(r.URL.Path, "/")
		for i := range segs {
			segs[i], _, _ = strings.Cut(segs[i], ";")
		}
		r.URL.Path, r.URL.RawPath = strings.Join(segs, "/"), ""
		if m := r.Header.Get("X-HTTP-Method-Override"); m != "" {
			f.mu.Lock()
			f.overrides++
			f.mu.Unlock()
			r.Method = m
		}
		next.ServeHTTP(w, r)
	})
}

func (f *lenientFront) seen() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.overrides
}

// TestPathParametersAndMethodOverrides: ';' in a /v1 path is a 400 in the
// API's shape, never forwarded, and a method override never reaches the
// upstream: through a front that honours them, each once listed or
// reached another tenant's files (issue 26, point 4).
func TestPathParametersAndMethodOverrides(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	front := &lenientFront{}
	h := newHarness(t, withAnthropic, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		inner := o.wrapUpstream
		o.wrapUpstream = func(mock http.Handler) http.Handler { return front.wrap(inner(mock)) }
	})
	ctx := context.Background()
	oc := objectstest.SDK(h.gw.URL, acmeKey)
	f, err := oc.Files.New(ctx, officialopenai.FileNewParams{
		File: officialopenai.File(strings.NewReader("secret of acme\n"), "acme.txt", "text/plain"), Purpose: officialopenai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	calls := len(fake.Calls())
	openAIBad := `{"error":{"message":"` + errPathParams.Message + `","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`
	anthropicBad := `{"type":"error","error":{"type":"invalid_request_error","message":"` + errPathParams.Message + `"}}`
	tests := []struct {
		method, path string
		hdr          []string
		want         string
	}{
		{"GET", "/v1/files;x", nil, openAIBad},
		{"GET", "/v1/files;x/" + f.ID + "/content", nil, openAIBad},
		{"DELETE", "/v1/files;x/" + f.ID, nil, openAIBad},
		{"GET", "/v1/files/" + f.ID + ";x", nil, openAIBad},
		{"GET", "/v1/files%3Bx", nil, openAIBad},
		{"POST", "/v1/chat/completions;x", nil, openAIBad},
		{"GET", "/v1/files;x", []string{"Anthropic-Version", "2023-06-01"}, anthropicBad},
		{"POST", "/v1/messages;x", nil, anthropicBad},
	}
	for _, tt := range tests {
		req := objectstest.NewRequest(t, tt.method, h.gw.URL+tt.path, betaKey, "")
		req.URL.Opaque = tt.path
		for i := 0; i+1 < len(tt.hdr); i += 2 {
			req.Header.Set(tt.hdr[i], tt.hdr[i+1])
		}
		if code, body := objectstest.Do(t, req); code != 400 || body != tt.want {
			t.Errorf("%s %s %v = %d %s; want 400 %s", tt.method, tt.path, tt.hdr, code, body, tt.want)
		}
	}
	if n := len(fake.Calls()) - calls; n != 0 {
		t.Errorf("requests with path parameters reached the upstream %d times: %v", n, fake.Calls()[calls:])
	}

	// A POST with an override is a POST upstream: never the shared list.
	req := objectstest.NewRequest(t, "POST", h.gw.URL+"/v1/files", betaKey, "")
	req.Header.Set("X-HTTP-Method-Override", "GET")
	req.Header.Set("X-HTTP-Method", "GET")
	req.Header.Set("X-Method-Override", "GET")
	if code, body := objectstest.Do(t, req); strings.Contains(body, f.ID) {
		t.Errorf("POST /v1/files with X-HTTP-Method-Override: GET = %d %s; it lists another tenant's file", code, body)
	}
	if n := front.seen(); n != 0 {
		t.Errorf("the upstream saw %d method overrides; want none", n)
	}
	for _, hd := range h.seenHeaders() {
		for _, k := range []string{"X-Http-Method-Override", "X-Http-Method", "X-Method-Override"} {
			if hd.Get(k) != "" {
				t.Errorf("the upstream got %s", k)
			}
		}
	}
}

// TestEscapedIDsAreTheirDecodedIDs: the escapes SDKs put in ids (the
// Node SDKs' encodeURIComponent turns the colons of a fine-tuned model into
// %3A) are not refused: the path routes decoded, and the id checked is the
// one the upstream will read.
func TestEscapedIDsAreTheirDecodedIDs(t *testing.T) {
	h := newHarness(t)
	for _, tt := range []struct{ method, path, id string }{
		{"DELETE", "/v1/models/ft%3Agpt-4o-mini%3Aother%3A%3Aabc", "ft:gpt-4o-mini:other::abc"},
		{"GET", "/v1/files/%66ile-%41bc", "file-Abc"},
	} {
		req := objectstest.NewRequest(t, tt.method, h.gw.URL+tt.path, acmeKey, "")
		req.URL.Opaque = tt.path
		if code, body := objectstest.Do(t, req); code != 404 || body != objectstest.NotFoundBody(tt.id) {
			t.Errorf("%s %s = %d %s; want Corral's 404 for %s", tt.method, tt.path, code, body, tt.id)
		}
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("requests for nobody's objects reached the upstream %d times", n)
	}
}
