package mockllm_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestErrorModels(t *testing.T) {
	tests := []struct {
		give       string
		wantStatus int
		wantType   string
		wantCode   string
	}{
		{"mock-400", 400, "invalid_request_error", "invalid_request"},
		{"mock-401", 401, "invalid_request_error", "invalid_api_key"},
		{"mock-403", 403, "permission_error", "permission_denied"},
		{"mock-404", 404, "invalid_request_error", "model_not_found"},
		{"mock-408", 408, "timeout_error", "request_timeout"},
		{"mock-409", 409, "conflict_error", "conflict"},
		{"mock-422", 422, "invalid_request_error", "unprocessable_entity"},
		{"mock-429", 429, "requests", "rate_limit_exceeded"},
		{"mock-500", 500, "server_error", "server_error"},
		{"mock-502", 502, "server_error", "bad_gateway"},
		{"mock-503", 503, "server_error", "service_unavailable"},
	}
	bodies := []struct{ path, body string }{
		{"/v1/chat/completions", `{"model":%q,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/chat/completions", `{"model":%q,"stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"/v1/completions", `{"model":%q,"prompt":"hi"}`},
		{"/v1/embeddings", `{"model":%q,"input":"hi"}`},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		for _, b := range bodies {
			t.Run(tt.give+b.path, func(t *testing.T) {
				status, h, body := post(t, ts, b.path, fmt.Sprintf(b.body, tt.give))
				checkError(t, status, h, body, tt.wantStatus, tt.wantType, tt.wantCode)
			})
		}
	}
}

func TestErrorMessages(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	_, _, body := post(t, ts, "/v1/chat/completions", `{"model":"mock-404","messages":[{"role":"user","content":"hi"}]}`)
	e := decode[apiError](t, body)
	want := "The model `mock-404` does not exist or you do not have access to it."
	if e.Error.Message == nil || *e.Error.Message != want {
		t.Errorf("message = %v, want %q", e.Error.Message, want)
	}

	status, h, _ := post(t, ts, "/v1/chat/completions", `{"model":"mock-429","messages":[{"role":"user","content":"hi"}]}`)
	if status != 429 || h.Get("Retry-After") != "1" || h.Get("Retry-After-Ms") != "1000" {
		t.Errorf("429 status, Retry-After, retry-after-ms = %d, %q, %q; want 429, 1, 1000",
			status, h.Get("Retry-After"), h.Get("Retry-After-Ms"))
	}
}

func TestRequestErrors(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		path       string
		give       string
		wantStatus int
		wantCode   string
	}{
		{"unknown path", "POST", "/v1/unknown", `{}`, 404, "unknown_url"},
		{"root", "GET", "/", ``, 404, "unknown_url"},
		{"unknown model id", "GET", "/v1/models/nope", ``, 404, "model_not_found"},
		{"GET on chat", "GET", "/v1/chat/completions", ``, 405, "method_not_allowed"},
		{"POST on models", "POST", "/v1/models", `{}`, 405, "method_not_allowed"},
		{"bad JSON", "POST", "/v1/chat/completions", `{"model":`, 400, "invalid_request"},
		{"no model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"no messages", "POST", "/v1/chat/completions", `{"model":"m"}`, 400, "invalid_request"},
		{"bad content", "POST", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":3}]}`, 400, "invalid_request"},
		{"no prompt", "POST", "/v1/completions", `{"model":"m"}`, 400, "invalid_request"},
		{"no input", "POST", "/v1/embeddings", `{"model":"m"}`, 400, "invalid_request"},
		{"empty input", "POST", "/v1/embeddings", `{"model":"m","input":[]}`, 400, "invalid_request"},
		{"bad dimensions", "POST", "/v1/embeddings", `{"model":"m","input":"x","dimensions":-1}`, 400, "invalid_request"},
		{"bad encoding", "POST", "/v1/embeddings", `{"model":"m","input":"x","encoding_format":"hex"}`, 400, "invalid_request"},
		{"bad n", "POST", "/v1/chat/completions", `{"model":"m","n":1000,"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"bad override status", "POST", "/v1/chat/completions", `{"model":"m","mock":{"status":200},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"bad override latency", "POST", "/v1/chat/completions", `{"model":"m","mock":{"latency_ms":-1},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"huge override delay", "POST", "/v1/chat/completions", `{"model":"m","mock":{"chunk_delay_ms":9223372036854775807},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
		{"bad override chunks", "POST", "/v1/chat/completions", `{"model":"m","mock":{"chunks":0},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request"},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, ts.URL+tt.path, strings.NewReader(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body := readAll(t, resp)
			e := decode[apiError](t, body)
			if resp.StatusCode != tt.wantStatus || e.Error.Code == nil || *e.Error.Code != tt.wantCode || e.Error.Message == nil || *e.Error.Message == "" {
				t.Errorf("status, body = %d, %s; want %d, code %q", resp.StatusCode, body, tt.wantStatus, tt.wantCode)
			}
		})
	}
}

// checkError checks an OpenAI error answer.
func checkError(t *testing.T, status int, h http.Header, body []byte, wantStatus int, wantType, wantCode string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("status = %d, want %d; body %s", status, wantStatus, body)
	}
	if got := h.Get("Content-Type"); got != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", got)
	}
	e := decode[apiError](t, body)
	d := e.Error
	if d.Message == nil || *d.Message == "" || d.Type == nil || *d.Type != wantType || d.Code == nil || *d.Code != wantCode {
		t.Errorf("error = %s; want type %q, code %q and a message", body, wantType, wantCode)
	}
	var raw map[string]map[string]any
	_ = json.Unmarshal(body, &raw)
	if p, ok := raw["error"]["param"]; !ok || p != nil {
		t.Errorf(`error has no "param": null: %s`, body)
	}
}
