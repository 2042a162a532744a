package objectstest

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
)

// SDK is an official openai-go client of a gateway at base, without retries.
func SDK(base, key string) officialopenai.Client {
	return officialopenai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// Call sends one request with key (a JSON body when body is set) and
// returns the status and body.
func Call(t testing.TB, method, url, key, body string) (int, string) {
	t.Helper()
	req := NewRequest(t, method, url, key, body)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	return Do(t, req)
}

// NewRequest is a request with key as its bearer token and body (none
// when empty), and no other header, for a test to add its own.
func NewRequest(t testing.TB, method, url, key, body string) *http.Request {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	return req
}

// Do sends req and returns the status and the whole body; no answer at
// all fails the test.
func Do(t testing.TB, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// NotFoundBody is Corral's 404 for an object the caller does not own.
func NotFoundBody(id string) string {
	return `{"error":{"message":"No such object: ` + id + `","type":"invalid_request_error","param":null,"code":"not_found"}}`
}

// Owned is what the owning tenant created through the gateway.
type Owned struct {
	File, Batch, Output, Resp, Streamed string
}

// CreateAsOwner makes a file, a batch over it, a stored response and a
// streamed stored response through three different instances with the
// official SDK, and checks the owner reads each back through another.
func CreateAsOwner(t testing.TB, bases []string, key string) Owned {
	t.Helper()
	ctx := context.Background()
	c0, c1, c2 := SDK(bases[0], key), SDK(bases[1%len(bases)], key), SDK(bases[2%len(bases)], key)
	var got Owned

	f, err := c0.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(`{"custom_id":"1"}`+"\n"), "input.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatalf("Files.New: %v", err)
	}
	got.File = f.ID
	if g, err := c1.Files.Get(ctx, f.ID); err != nil || g.Filename != "input.jsonl" {
		t.Fatalf("owner's Files.Get on another instance = %+v, %v", g, err)
	}
	b, err := c2.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h})
	if err != nil {
		t.Fatalf("Batches.New: %v", err)
	}
	got.Batch, got.Output = b.ID, b.OutputFileID
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
	got.Resp = r.ID
	if g, err := c1.Responses.Get(ctx, r.ID, responses.ResponseGetParams{}); err != nil || g.OutputText() != r.OutputText() {
		t.Fatalf("owner's Responses.Get = %+v, %v", g, err)
	}
	st := c2.Responses.NewStreaming(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", PreviousResponseID: officialopenai.String(r.ID),
		Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("and then?")}})
	var text string
	for st.Next() {
		ev := st.Current()
		if ev.Type == "response.completed" {
			got.Streamed, text = ev.Response.ID, ev.Response.OutputText()
		}
	}
	if err := st.Err(); err != nil || got.Streamed == "" || !strings.Contains(text, "after "+r.ID) {
		t.Fatalf("owner's streamed Responses with previous_response_id: id %q text %q err %v", got.Streamed, text, err)
	}
	if _, err := c0.Responses.Get(ctx, got.Streamed, responses.ResponseGetParams{}); err != nil {
		t.Fatalf("owner's Get of the streamed response: %v", err)
	}
	return got
}

// CheckOthersRefused proves that key (not the owner) gets the same 404 for
// every request naming the owner's objects as for an id that never
// existed, and that none of those requests reached the upstream
// (mentioning counts the upstream requests that named an id).
func CheckOthersRefused(t testing.TB, base, key string, a Owned, mentioning func(id string) int) {
	t.Helper()
	before := map[string]int{}
	for _, id := range []string{a.File, a.Batch, a.Output, a.Resp, a.Streamed} {
		before[id] = mentioning(id)
	}
	tests := []struct {
		method, path, body, id string
	}{
		{"GET", "/v1/files/" + a.File, "", a.File},
		{"GET", "/v1/files/" + a.File + "/content", "", a.File},
		{"DELETE", "/v1/files/" + a.File, "", a.File},
		{"GET", "/v1/files/" + a.Output + "/content", "", a.Output},
		{"GET", "/v1/batches/" + a.Batch, "", a.Batch},
		{"POST", "/v1/batches/" + a.Batch + "/cancel", "", a.Batch},
		{"POST", "/v1/batches", `{"input_file_id":"` + a.File + `","endpoint":"/v1/chat/completions","completion_window":"24h"}`, a.File},
		{"GET", "/v1/responses/" + a.Resp, "", a.Resp},
		{"DELETE", "/v1/responses/" + a.Resp, "", a.Resp},
		{"POST", "/v1/responses/" + a.Resp + "/cancel", "", a.Resp},
		{"GET", "/v1/responses/" + a.Streamed + "/input_items", "", a.Streamed},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"hi","previous_response_id":"` + a.Resp + `"}`, a.Resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":[{"role":"user","content":[{"type":"input_file","file_id":"` + a.File + `"}]}]}`, a.File},
		{"POST", "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"` + a.File + `"}}]}]}`, a.File},
		{"GET", "/v1/files/" + a.File + "?x=1", "", a.File},
		{"GET", "/v1/files/" + a.File + "/", "", a.File},
		{"GET", "/v1/FILES/" + a.File, "", a.File},
		{"GET", "/v1/files?file_id=" + a.File, "", a.File},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":[{"type":"item_reference","id":"` + a.Resp + `"}]}`, a.Resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","Previous_Response_ID":"` + a.Resp + `"}`, a.Resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","previous\u005fresponse_id":"` + a.Resp + `"}`, a.Resp},
		{"POST", "/v1/responses", `{"model":"gpt-4o-mini","input":"x","conversation":{"id":"` + a.Resp + `"}}`, a.Resp},
		{"GET", "/v1/files/" + strings.Replace(a.File, "-", "%2D", 1), "", a.File},
	}
	for _, tt := range tests {
		code, body := Call(t, tt.method, base+tt.path, key, tt.body)
		if code != http.StatusNotFound || body != NotFoundBody(tt.id) {
			t.Errorf("%s %s as another tenant = %d %s; want 404 %s", tt.method, tt.path, code, body, NotFoundBody(tt.id))
		}
		// The same request for an id nobody has is indistinguishable.
		ghost := "file-doesnotexist0000000000"
		code2, body2 := Call(t, tt.method, base+strings.ReplaceAll(strings.Replace(tt.path, "%2D", "-", 1), tt.id, ghost), key, strings.ReplaceAll(tt.body, tt.id, ghost))
		if code2 != code || body2 != strings.ReplaceAll(body, tt.id, ghost) {
			t.Errorf("%s %s: answer for an unknown id differs: %d %s vs %d %s", tt.method, tt.path, code2, body2, code, body)
		}
	}
	for _, p := range []string{"/v1//files/" + a.File, "/v1/files/%2F" + a.File, "/v1/files/../files/" + a.File} {
		if code, _ := Call(t, "GET", base+p, key, ""); code != http.StatusBadRequest && code != http.StatusNotFound {
			t.Errorf("GET %s as another tenant = %d; want 400 or 404", p, code)
		}
	}
	for id, n := range before {
		if got := mentioning(id); got != n {
			t.Errorf("requests naming %s reached the upstream: %d → %d", id, n, got)
		}
	}
}

// ListIDs returns the ids in a list answer, checking that first_id and
// last_id match them.
func ListIDs(t testing.TB, base, path, key string) []string {
	t.Helper()
	code, body := Call(t, "GET", base+path, key, "")
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
