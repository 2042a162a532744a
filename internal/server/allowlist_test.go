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

// TestModelAllowListReadsWhatTheUpstreamReads holds fault 3 of issue 13:
// the allow-list was checked only on proxied bodies starting with '{', and
// read "model" where a case-insensitive decoder upstream reads "MODEL".
// Every refused body must be refused before the upstream sees it.
func TestModelAllowListReadsWhatTheUpstreamReads(t *testing.T) {
	form, formType := multipartBody(t, "file", "RIFF....", "model", "whisper-1")
	twoModels, twoType := multipartBody(t, "model", "gpt-4o-mini", "model", "whisper-1")
	tests := []struct {
		name        string
		path        string
		contentType string
		body        string
		wantStatus  int
		wantCode    string
	}{
		{"proxied, leading space", "/v1/moderations", "application/json", ` {"model":"o1-pro","input":"x"}`, 403, "model_not_allowed"},
		{"proxied, leading newline, no content type", "/v1/moderations", "", "\r\n\t{\"model\":\"o1-pro\"}", 403, "model_not_allowed"},
		{"proxied, leading space, text/plain", "/v1/moderations", "text/plain", ` {"model":"o1-pro"}`, 403, "model_not_allowed"},
		{"proxied, upper-case key alone", "/v1/moderations", "application/json", `{"MODEL":"o1-pro","input":"x"}`, 400, "invalid_request_error"},
		{"proxied, case variant beside an allowed model", "/v1/moderations", "application/json", `{"model":"gpt-4o-mini","Model":"o1-pro"}`, 400, "invalid_request_error"},
		{"proxied, escaped case variant", "/v1/moderations", "application/json", `{"\u004dODEL":"o1-pro"}`, 400, "invalid_request_error"},
		{"proxied, byte order mark", "/v1/moderations", "application/json", "\xef\xbb\xbf{\"model\":\"o1-pro\"}", 400, "invalid_request_error"},
		{"proxied, JSON content type, not JSON", "/v1/moderations", "application/json; charset=utf-8", "\x00{\x00\"\x00m", 400, "invalid_request_error"},
		{"proxied, model not a string", "/v1/moderations", "application/json", `{"model":["o1-pro"]}`, 400, "invalid_request_error"},
		{"proxied, model null", "/v1/moderations", "application/json", `{"model":null}`, 400, "invalid_request_error"},
		{"proxied, multipart form", "/v1/audio/transcriptions", formType, form, 403, "model_not_allowed"},
		{"proxied, multipart form with two models", "/v1/audio/transcriptions", twoType, twoModels, 400, "invalid_request_error"},
		{"proxied, multipart form without boundary", "/v1/audio/transcriptions", "multipart/form-data", form, 400, "invalid_request_error"},
		{"proxied, url-encoded form", "/v1/audio/speech", "application/x-www-form-urlencoded", "input=hi&model=tts-1", 403, "model_not_allowed"},
		{"proxied, url-encoded form with two models", "/v1/audio/speech", "application/x-www-form-urlencoded", "model=gpt-4o-mini&model=tts-1", 400, "invalid_request_error"},
		{"cached, leading space", "/v1/chat/completions", "application/json", ` {"model":"gpt-4o","messages":[]}`, 403, "model_not_allowed"},
		{"cached, case variant beside an allowed model", "/v1/chat/completions", "application/json", `{"model":"gpt-4o-mini","MODEL":"gpt-4o","messages":[]}`, 400, "invalid_request_error"},
		{"cached, upper-case key alone", "/v1/chat/completions", "application/json", `{"MODEL":"gpt-4o","messages":[]}`, 400, "invalid_request_error"},
		{"cached, case-variant stream", "/v1/chat/completions", "application/json", `{"model":"gpt-4o-mini","Stream":true,"messages":[]}`, 400, "invalid_request_error"},
	}
	h := newHarness(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, h.gw.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+limitedKey)
			if tt.contentType != "" {
				req.Header.Set("Content-Type", tt.contentType)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
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
	tests := []struct {
		name        string
		key         string
		path        string
		contentType string
		body        string
	}{
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
			req, _ := http.NewRequest(http.MethodPost, h.gw.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.key)
			req.Header.Set("Content-Type", tt.contentType)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if n := h.mock.Stats().Requests - before; n != 1 {
				t.Errorf("%d %s, upstream calls = %d; want the request forwarded", resp.StatusCode, b, n)
			}
		})
	}
}
