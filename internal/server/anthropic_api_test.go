package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	officialopenai "github.com/openai/openai-go/v3"

	"github.com/corralhq/corral/internal/objects/objectstest"
)

// fakeAnthropicAccount serves Anthropic's Models and Files APIs, as
// Anthropic's API answers them, to requests that carry the anthropic
// upstream's key (the harness's "claude"); everything else goes to next.
// Its files are one shared account, every tenant's behind Corral, and it
// logs every call it serves.
type fakeAnthropicAccount struct {
	mu    sync.Mutex // protects everything below
	files []map[string]any
	data  map[string][]byte
	calls []string
	betas []string // the anthropic-beta of each Files call
}

var fakeClaudeModels = map[string]string{"claude-sonnet-4-5": "Claude Sonnet 4.5", "claude-haiku-4-5": "Claude Haiku 4.5"}

func (f *fakeAnthropicAccount) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != anthropicUpstreamKey || r.Header.Get("Anthropic-Version") == "" {
			next.ServeHTTP(w, r)
			return
		}
		if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok {
			f.log(r)
			name, ok := fakeClaudeModels[id]
			if !ok {
				anthropicErr(w, 404, "not_found_error", "model: "+id)
				return
			}
			writeAnthropic(w, map[string]any{"type": "model", "id": id, "display_name": name, "created_at": "2025-09-29T00:00:00Z"})
			return
		}
		if r.URL.Path == "/v1/files" || strings.HasPrefix(r.URL.Path, "/v1/files/") {
			f.log(r)
			f.serveFiles(w, r, strings.Trim(strings.TrimPrefix(r.URL.Path, "/v1/files"), "/"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (f *fakeAnthropicAccount) log(r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, r.Method+" "+r.URL.RequestURI())
	if strings.HasPrefix(r.URL.Path, "/v1/files") {
		f.betas = append(f.betas, r.Header.Get("Anthropic-Beta"))
	}
}

// mentioning counts the calls whose path or query named id.
func (f *fakeAnthropicAccount) mentioning(id string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.Contains(c, id) {
			n++
		}
	}
	return n
}

func (f *fakeAnthropicAccount) serveFiles(w http.ResponseWriter, r *http.Request, rest string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id, tail, _ := strings.Cut(rest, "/")
	switch {
	case rest == "" && r.Method == http.MethodPost:
		file, hdr, err := r.FormFile("file")
		if err != nil {
			anthropicErr(w, 400, "invalid_request_error", "file: Field required")
			return
		}
		b, _ := io.ReadAll(file)
		m := map[string]any{"id": fmt.Sprintf("file_011CNha8iCJcU1wXNR6q%04d", len(f.files)), "type": "file", "filename": hdr.Filename,
			"mime_type": hdr.Header.Get("Content-Type"), "size_bytes": len(b), "created_at": "2025-04-14T12:00:00Z", "downloadable": true}
		f.files = append(f.files, m)
		if f.data == nil {
			f.data = map[string][]byte{}
		}
		f.data[m["id"].(string)] = b
		writeAnthropic(w, m)
	case rest == "" && r.Method == http.MethodGet:
		// Newest first, paged with limit and after_id.
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		if limit <= 0 {
			limit = 20
		}
		after := r.URL.Query().Get("after_id")
		var page []map[string]any
		started, more := after == "", false
		for i := len(f.files) - 1; i >= 0; i-- {
			if !started {
				started = f.files[i]["id"] == after
				continue
			}
			if len(page) == limit {
				more = true
				break
			}
			page = append(page, f.files[i])
		}
		out := map[string]any{"data": page, "has_more": more, "first_id": nil, "last_id": nil}
		if len(page) > 0 {
			out["first_id"], out["last_id"] = page[0]["id"], page[len(page)-1]["id"]
		}
		writeAnthropic(w, out)
	default:
		i := f.indexLocked(id)
		switch {
		case i < 0:
			anthropicErr(w, 404, "not_found_error", "File not found: "+id)
		case tail == "content" && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(f.data[id])
		case tail == "" && r.Method == http.MethodGet:
			writeAnthropic(w, f.files[i])
		case tail == "" && r.Method == http.MethodDelete:
			f.files = append(f.files[:i], f.files[i+1:]...)
			writeAnthropic(w, map[string]any{"id": id, "type": "file_deleted"})
		default:
			anthropicErr(w, 404, "not_found_error", "Not found")
		}
	}
}

func (f *fakeAnthropicAccount) indexLocked(id string) int {
	for i, m := range f.files {
		if m["id"] == id {
			return i
		}
	}
	return -1
}

func writeAnthropic(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_011fake")
	_ = json.NewEncoder(w).Encode(v)
}

func anthropicErr(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// withFakeAnthropic puts f in front of the harness's upstream.
func withFakeAnthropic(f *fakeAnthropicAccount) func(*harnessOptions) {
	return func(o *harnessOptions) {
		o.anthropic = true
		inner := o.wrapUpstream
		o.wrapUpstream = func(mock http.Handler) http.Handler {
			if inner != nil {
				mock = inner(mock)
			}
			return f.wrap(mock)
		}
	}
}

// anthropicStatus is the status of an error the SDK returned (0 for none).
func anthropicStatus(err error) (int, string) {
	var ae *anthropic.Error
	if errors.As(err, &ae) {
		return ae.StatusCode, ae.RawJSON()
	}
	return 0, fmt.Sprint(err)
}

// TestAnthropicModelsGet: GET /v1/models/{id} from Anthropic's SDK goes
// to an anthropic upstream and is answered in Anthropic's shape; a model
// outside the tenant's allow-list is not found there, never forwarded, as
// on OpenAI's API (issue 25, point 2).
func TestAnthropicModelsGet(t *testing.T) {
	fake := &fakeAnthropicAccount{}
	h := newHarness(t, withFakeAnthropic(fake))
	ctx := context.Background()
	acme, limited := claudeClient(h.gw.URL, acmeKey), claudeClient(h.gw.URL, limitedKey)
	var raw *http.Response
	m, err := acme.Models.Get(ctx, "claude-sonnet-4-5", anthropic.ModelGetParams{}, aoption.WithResponseInto(&raw))
	if err != nil || m.ID != "claude-sonnet-4-5" || m.DisplayName != "Claude Sonnet 4.5" || raw.Header.Get("X-Corral-Upstream") != "claude" {
		t.Fatalf("Models.Get = %+v, %v", m, err)
	}
	_, err = acme.Models.Get(ctx, "claude-unknown", anthropic.ModelGetParams{})
	if code, body := anthropicStatus(err); code != 404 || !strings.Contains(body, `"type":"not_found_error"`) || !strings.Contains(body, "model: claude-unknown") {
		t.Errorf("Models.Get of an unknown model = %d %s; want the upstream's 404", code, body)
	}
	// limited may use gpt-4o-mini and text-embedding-3-small only.
	before := fake.mentioning("claude-haiku-4-5")
	_, err = limited.Models.Get(ctx, "claude-haiku-4-5", anthropic.ModelGetParams{})
	want := `{"type":"error","error":{"type":"not_found_error","message":"The model \"claude-haiku-4-5\" does not exist or you do not have access to it."}}`
	if code, body := anthropicStatus(err); code != 404 || body != want {
		t.Errorf("Models.Get outside the allow-list = %d %s; want 404 %s", code, body, want)
	}
	if fake.mentioning("claude-haiku-4-5") != before {
		t.Error("a model outside the allow-list was asked of the upstream")
	}
	// The same rule in OpenAI's shape.
	oc := objectstest.SDK(h.gw.URL, limitedKey)
	_, err = oc.Models.Get(ctx, "gpt-4o")
	var oe *officialopenai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 404 || oe.Code != "model_not_found" {
		t.Errorf("OpenAI Models.Get outside the allow-list = %v; want 404 model_not_found", err)
	}
	if om, err := oc.Models.Get(ctx, "gpt-4o-mini"); err != nil || om.ID != "gpt-4o-mini" {
		t.Errorf("OpenAI Models.Get in the allow-list = %+v, %v", om, err)
	}
	// A path of Anthropic's API Corral does not serve is not forwarded.
	a, _ := getWith(ctx, h.gw.URL+"/v1/skills", "X-Api-Key", acmeKey, "Anthropic-Version", "2023-06-01")
	if a.status != 404 || !strings.HasPrefix(a.body, `{"type":"error","error":{"type":"not_found_error"`) {
		t.Errorf("GET /v1/skills for Anthropic's API = %d %s; want 404 not_found_error", a.status, a.body)
	}
	// Nor is an OpenAI endpoint asked for Anthropic's API.
	c := postMessages(ctx, h.gw.URL+"/v1/chat/completions", acmeKey, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`, "Anthropic-Version", "2023-06-01")
	if c.status != 404 || !strings.HasPrefix(c.body, `{"type":"error","error":{"type":"not_found_error"`) || c.header.Get("X-Corral-Cache") != "" {
		t.Errorf("chat completions for Anthropic's API = %d %v %s; want 404 not_found_error", c.status, c.header, c.body)
	}
	if n := h.mock.Stats().Paths["/v1/chat/completions"] + h.mock.Stats().Paths["/v1/skills"]; n != 0 {
		t.Errorf("refused requests reached the upstream %d times", n)
	}
}

var filesBeta = []anthropic.AnthropicBeta{anthropic.AnthropicBetaFilesAPI2025_04_14}

func uploadClaudeFile(t *testing.T, c anthropic.Client, name, text string) string {
	t.Helper()
	var raw *http.Response
	f, err := c.Beta.Files.Upload(context.Background(), anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader(text), name, "text/plain"), Betas: filesBeta},
		aoption.WithResponseInto(&raw))
	if err != nil || f.ID == "" || f.Filename != name || raw.Header.Get("X-Corral-Upstream") != "claude" {
		t.Fatalf("Beta.Files.Upload = %+v, %v", f, err)
	}
	return f.ID
}

// TestAnthropicFilesStayTheirOwners: Anthropic's Files API (with
// anthropic-version, anthropic-beta files-api-2025-04-14) goes to an
// anthropic upstream, with ownership records of its own: a tenant lists,
// reads, downloads and deletes only its own files, and an OpenAI file id
// and an Anthropic file id never name each other's (issue 25, point 2).
func TestAnthropicFilesStayTheirOwners(t *testing.T) {
	fake, openaiFiles := &fakeAnthropicAccount{}, objectstest.New()
	h := newHarness(t, withObjectUpstream(openaiFiles, &pathLog{}), withFakeAnthropic(fake))
	ctx := context.Background()
	acme, other := claudeClient(h.gw.URL, acmeKey), claudeClient(h.gw.URL, limitedKey)
	mine := uploadClaudeFile(t, acme, "acme.txt", "acme's secret")
	theirs := uploadClaudeFile(t, other, "limited.txt", "limited's own")

	// The owner reads its file every way.
	if md, err := acme.Beta.Files.GetMetadata(ctx, mine, anthropic.BetaFileGetMetadataParams{Betas: filesBeta}); err != nil || md.ID != mine || md.Filename != "acme.txt" {
		t.Errorf("owner's GetMetadata = %+v, %v", md, err)
	}
	resp, err := acme.Beta.Files.Download(ctx, mine, anthropic.BetaFileDownloadParams{Betas: filesBeta})
	if err != nil {
		t.Fatalf("owner's Download: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "acme's secret" {
		t.Errorf("owner's Download = %q", b)
	}
	// Lists hold the caller's files only, in Anthropic's list shape.
	for _, tt := range []struct {
		c    anthropic.Client
		want string
	}{{acme, mine}, {other, theirs}} {
		page, err := tt.c.Beta.Files.List(ctx, anthropic.BetaFileListParams{Betas: filesBeta})
		if err != nil || len(page.Data) != 1 || page.Data[0].ID != tt.want {
			t.Errorf("List = %+v, %v; want only %s", page, err, tt.want)
		}
	}
	list, _ := getWith(ctx, h.gw.URL+"/v1/files?limit=1", "X-Api-Key", limitedKey, "Anthropic-Version", "2023-06-01", "Anthropic-Beta", "files-api-2025-04-14")
	var shape struct {
		Data    []struct{ ID string } `json:"data"`
		HasMore *bool                 `json:"has_more"`
		FirstID string                `json:"first_id"`
		LastID  string                `json:"last_id"`
	}
	if list.status != 200 || json.Unmarshal([]byte(list.body), &shape) != nil || len(shape.Data) != 1 || shape.HasMore == nil ||
		shape.FirstID != theirs || shape.LastID != theirs {
		t.Errorf("raw list = %d %s; want Anthropic's shape with limited's file only", list.status, list.body)
	}

	// Another tenant reaches none of it, and nothing is forwarded.
	n := fake.mentioning(mine)
	notFound := `{"type":"error","error":{"type":"not_found_error","message":"No such object: ` + mine + `"}}`
	_, err = other.Beta.Files.GetMetadata(ctx, mine, anthropic.BetaFileGetMetadataParams{Betas: filesBeta})
	if code, body := anthropicStatus(err); code != 404 || body != notFound {
		t.Errorf("other's GetMetadata = %d %s", code, body)
	}
	_, err = other.Beta.Files.Download(ctx, mine, anthropic.BetaFileDownloadParams{Betas: filesBeta})
	if code, body := anthropicStatus(err); code != 404 || body != notFound {
		t.Errorf("other's Download = %d %s", code, body)
	}
	_, err = other.Beta.Files.Delete(ctx, mine, anthropic.BetaFileDeleteParams{Betas: filesBeta})
	if code, body := anthropicStatus(err); code != 404 || body != notFound {
		t.Errorf("other's Delete = %d %s", code, body)
	}
	if fake.mentioning(mine) != n {
		t.Error("another tenant's requests for the file reached the upstream")
	}

	// The two APIs' files never cross: an OpenAI request naming the
	// Anthropic file, and an Anthropic request naming an OpenAI file, are
	// both not found.
	if code, body := objectstest.Call(t, "GET", h.gw.URL+"/v1/files/"+mine, acmeKey, ""); code != 404 || body != objectstest.NotFoundBody(mine) {
		t.Errorf("OpenAI GET of the owner's Anthropic file = %d %s", code, body)
	}
	oc := objectstest.SDK(h.gw.URL, acmeKey)
	of, err := oc.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader("x\n"), "o.txt", "text/plain"), Purpose: officialopenai.FilePurposeUserData})
	if err != nil {
		t.Fatal(err)
	}
	_, err = acme.Beta.Files.GetMetadata(ctx, of.ID, anthropic.BetaFileGetMetadataParams{Betas: filesBeta})
	if code, body := anthropicStatus(err); code != 404 || !strings.Contains(body, "No such object: "+of.ID) {
		t.Errorf("Anthropic GetMetadata of the owner's OpenAI file = %d %s", code, body)
	}
	if page, err := acme.Beta.Files.List(ctx, anthropic.BetaFileListParams{Betas: filesBeta}); err != nil || len(page.Data) != 1 {
		t.Errorf("Anthropic list after an OpenAI upload = %+v, %v", page, err)
	}

	// The owner's delete removes the record: the next read is Corral's 404.
	if d, err := acme.Beta.Files.Delete(ctx, mine, anthropic.BetaFileDeleteParams{Betas: filesBeta}); err != nil || d.ID != mine {
		t.Fatalf("owner's Delete = %+v, %v", d, err)
	}
	n = fake.mentioning(mine)
	_, err = acme.Beta.Files.GetMetadata(ctx, mine, anthropic.BetaFileGetMetadataParams{Betas: filesBeta})
	if code, body := anthropicStatus(err); code != 404 || body != notFound || fake.mentioning(mine) != n {
		t.Errorf("GetMetadata after the delete = %d %s", code, body)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for _, beta := range fake.betas {
		if beta != "files-api-2025-04-14" {
			t.Errorf("the upstream got anthropic-beta %q; want the client's", beta)
		}
	}
}
