package objects

import (
	"strings"
	"testing"
)

// BenchmarkRefs measures the reference check every request pays: a chat
// prompt with no references (the pre-check alone) and one whose body
// names objects (the full walk).
func BenchmarkRefs(b *testing.B) {
	plain := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"` +
		strings.Repeat("Summarise the attached notes about the release plan. ", 16) + `"}],"temperature":0.2}`)
	withRefs := []byte(`{"model":"gpt-4o-mini","previous_response_id":"resp_abc","input":[{"role":"user","content":[{"type":"input_text","text":"` +
		strings.Repeat("Summarise the attached notes. ", 16) + `"},{"type":"input_file","file_id":"file-123"}]}],"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`)
	for _, bc := range []struct {
		name, path string
		body       []byte
	}{{"plain-chat", "/chat/completions", plain}, {"with-refs", "/responses", withRefs}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.body)))
			for b.Loop() {
				if _, err := Refs(bc.path, "application/json", bc.body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
