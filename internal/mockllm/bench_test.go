package mockllm_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

// The benchmarks call the handler directly, to measure the mock's own cost
// (the part that adds to a gateway benchmark), not the network.

func benchmarkHandler(b *testing.B, path, body string) {
	s := mockllm.New(mockllm.Options{StreamChunks: 20})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, req)
			if rec.Code != http.StatusOK {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
		}
	})
}

func BenchmarkChat(b *testing.B) {
	benchmarkHandler(b, "/v1/chat/completions",
		`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"write a haiku about a gateway"}]}`)
}

func BenchmarkChatStream(b *testing.B) {
	benchmarkHandler(b, "/v1/chat/completions",
		`{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"write a haiku about a gateway"}]}`)
}

func BenchmarkEmbeddings(b *testing.B) {
	benchmarkHandler(b, "/v1/embeddings", `{"model":"text-embedding-3-small","input":["a","b","c"],"dimensions":256}`)
}
