package server

import (
	"bytes"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"testing"
)

// multipartBody builds a multipart/form-data body with the given fields,
// in order, and returns it with its Content-Type.
func multipartBody(t *testing.T, fields ...string) (string, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := mw.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := mw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.String(), mw.FormDataContentType()
}

// modelBody is a request body a tenant sends to a path, for the
// allow-list to read the model from.
type modelBody struct {
	name        string
	key         string
	path        string
	contentType string // "" sends no Content-Type
	body        string
}

// post sends b to h's gateway; the caller closes the response body.
func (b modelBody) post(t *testing.T, h *harness) *http.Response {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, h.gw.URL+b.path, strings.NewReader(b.body))
	req.Header.Set("Authorization", "Bearer "+b.key)
	if b.contentType != "" {
		req.Header.Set("Content-Type", b.contentType)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestModelAllowListReadsWhatTheUpstreamReads holds fault 3 of issue 13:
// the allow-list was checked only on proxied bodies starting with '{', and
// read "model" where a case-insensitive decoder upstream reads "MODEL".
// Every refused body must be refused before the upstream sees it.
func TestModelAllowListReadsWhatTheUpstreamReads(t *testing.T) {
	form, formType := multipartBody(t, "file", "RIFF....", "model", "whisper-1")
	twoModels, twoType := multipartBody(t, "model", "gpt-4o-mini", "model", "whisper-1")
	tests := []struct {
		modelBody
		wantStatus int
		wantCode   string
	}{
		{modelBody{"proxied, leading space", limitedKey, "/v1/moderations", "application/json", ` {"model":"o1-pro","input":"x"}`}, 403, "model_not_allowed"},
		{modelBody{"proxied, leading newline, no content type", limitedKey, "/v1/moderations", "", "\r\n\t{\"model\":\"o1-pro\"}"}, 403, "model_not_allowed"},
		{modelBody{"proxied, leading space, text/plain", limitedKey, "/v1/moderations", "text/plain", ` {"model":"o1-pro"}`}, 403, "model_not_allowed"},
		{modelBody{"proxied, upper-case key alone", limitedKey, "/v1/moderations", "application/json", `{"MODEL":"o1-pro","input":"x"}`}, 400, "invalid_request_error"},
		{modelBody{"proxied, case variant beside an allowed model", limitedKey, "/v1/moderations", "application/json", `{"model":"gpt-4o-mini","Model":"o1-pro"}`}, 400, "invalid_request_error"},
		{modelBody{"proxied, escaped case variant", limitedKey, "/v1/moderations", "application/json", `{"\u004dODEL":"o1-pro"}`}, 400, "invalid_request_error"},
		{modelBody{"proxied, byte order mark", limitedKey, "/v1/moderations", "application/json", "\xef\xbb\xbf{\"model\":\"o1-pro\"}"}, 400, "invalid_request_error"},
		{modelBody{"proxied, JSON content type, not JSON", limitedKey, "/v1/moderations", "application/json; charset=utf-8", "\x00{\x00\"\x00m"}, 400, "invalid_request_error"},
		{modelBody{"proxied, model not a string", limitedKey, "/v1/moderations", "application/json", `{"model":["o1-pro"]}`}, 400, "invalid_request_error"},
		{modelBody{"proxied, model null", limitedKey, "/v1/moderations", "application/json", `{"model":null}`}, 400, "invalid_request_error"},
		{modelBody{"proxied, multipart form", limitedKey, "/v1/audio/transcriptions", formType, form}, 403, "model_not_allowed"},
		{modelBody{"proxied, multipart form with two models", limitedKey, "/v1/audio/transcriptions", twoType, twoModels}, 400, "invalid_request_error"},
		{modelBody{"proxied, multipart form without boundary", limitedKey, "/v1/audio/transcriptions", "multipart/form-data", form}, 400, "invalid_request_error"},
		{modelBody{"proxied, url-encoded form", limitedKey, "/v1/audio/speech", "application/x-www-form-urlencoded", "input=hi&model=tts-1"}, 403, "model_not_allowed"},
		{modelBody{"proxied, url-encoded form with two models", limitedKey, "/v1/audio/speech", "application/x-www-form-urlencoded", "model=gpt-4o-mini&model=tts-1"}, 400, "invalid_request_error"},
		{modelBody{"cached, leading space", limitedKey, "/v1/chat/completions", "application/json", ` {"model":"gpt-4o","messages":[]}`}, 403, "model_not_allowed"},
		{modelBody{"cached, case variant beside an allowed model", limitedKey, "/v1/chat/completions", "application/json", `{"model":"gpt-4o-mini","MODEL":"gpt-4o","messages":[]}`}, 400, "invalid_request_error"},
		{modelBody{"cached, upper-case key alone", limitedKey, "/v1/chat/completions", "application/json", `{"MODEL":"gpt-4o","messages":[]}`}, 400, "invalid_request_error"},
		{modelBody{"cached, case-variant stream", limitedKey, "/v1/chat/completions", "application/json", `{"model":"gpt-4o-mini","Stream":true,"messages":[]}`}, 400, "invalid_request_error"},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := tt.post(t, h)
			defer resp.Body.Close()
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			if typ, code, _ := openAIError(t, resp); typ != "invalid_request_error" || code != tt.wantCode {
				t.Errorf("error type, code = %q, %q; want invalid_request_error, %q", typ, code, tt.wantCode)
			}
		})
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("refused requests reached the upstream %d times; want 0", n)
	}
}

// TestModelAllowListLetsAllowedBodiesThrough keeps the check from refusing
// what it should pass: allowed models in every body form, bodies that name
// no model, and a tenant without an allow-list sending anything.
func TestModelAllowListLetsAllowedBodiesThrough(t *testing.T) {
	form, formType := multipartBody(t, "model", "gpt-4o-mini", "file", "RIFF....")
	tests := []modelBody{
		{"leading space, allowed model", limitedKey, "/v1/moderations", "application/json", ` {"model":"gpt-4o-mini","input":"x"}`},
		{"JSON without a model", limitedKey, "/v1/moderations", "application/json", `{"input":"x"}`},
		{"nested case variants", limitedKey, "/v1/moderations", "application/json", `{"model":"gpt-4o-mini","text":{"Format":1,"format":2}}`},
		{"multipart, allowed model", limitedKey, "/v1/audio/transcriptions", formType, form},
		{"no allow-list", acmeKey, "/v1/moderations", "application/json", `{"MODEL":"anything"}`},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := h.mock.Stats().Requests
			resp := tt.post(t, h)
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if n := h.mock.Stats().Requests - before; n != 1 {
				t.Errorf("%d %s, upstream calls = %d; want the request forwarded", resp.StatusCode, b, n)
			}
		})
	}
}
