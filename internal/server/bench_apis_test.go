package server

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

// benchPostTo posts body to path below /v1 and drains the answer.
func benchPostTo(b *testing.B, base, path, body string) {
	req, _ := http.NewRequest(http.MethodPost, base+"/v1"+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+acmeKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("X-Corral-Cache") != "HIT" {
		b.Fatalf("status %d, %s", resp.StatusCode, resp.Header.Get("X-Corral-Cache"))
	}
}

// BenchmarkAPIHits is a memory cache hit end to end for each cached API,
// plain and replayed as a stream, in one run so the APIs compare.
func BenchmarkAPIHits(b *testing.B) {
	b.Cleanup(benchClient.CloseIdleConnections)
	tests := []struct {
		name, path, body string
	}{
		{"chat", "/chat/completions", chatBody("api hit benchmark")},
		{"chat-stream", "/chat/completions", strings.Replace(chatBody("api hit benchmark"), `{"model"`, `{"stream":true,"model"`, 1)},
		{"responses", "/responses", `{"model":"gpt-4o-mini","input":"api hit benchmark"}`},
		{"responses-stream", "/responses", `{"model":"gpt-4o-mini","input":"api hit benchmark","stream":true}`},
		{"messages", "/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"api hit benchmark"}]}`},
		{"messages-stream", "/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"api hit benchmark"}],"stream":true}`},
	}
	h := newHarness(b, withAnthropic)
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			req, _ := http.NewRequest(http.MethodPost, h.gw.URL+"/v1"+tt.path, strings.NewReader(strings.Replace(tt.body, `"stream":true,`, "", 1)))
			req.Header.Set("Authorization", "Bearer "+acmeKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := benchClient.Do(req) // the MISS that stores the entry
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				benchPostTo(b, h.gw.URL, tt.path, tt.body)
			}
		})
	}
}
