package server

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/logtest"
)

// audioUpstream streams a spoken chat answer as OpenAI does: delta.audio
// with id, data, transcript and expires_at, for every call whose body
// names "spoken"; others go to next.
func audioUpstream(calls *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(strings.NewReader(string(b)))
			if !strings.Contains(string(b), "spoken") {
				next.ServeHTTP(w, r)
				return
			}
			calls.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			head := `data: {"id":"chatcmpl-a","object":"chat.completion.chunk","created":1,"model":"gpt-4o-audio-preview","choices":[`
			io.WriteString(w, head+`{"index":0,"delta":{"role":"assistant","content":null,"audio":{"id":"audio_1","data":"UklG","transcript":"Hel","expires_at":1735693200}},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, head+`{"index":0,"delta":{"audio":{"data":"RgAA","transcript":"lo"}},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, head+`{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		})
	}
}

// TestStreamedAudioIsNeverStoredEmpty: a chat request for a spoken answer
// is a BYPASS with its reason in the access line, and a stream that
// carries audio deltas the request did not announce is relayed whole but
// never stored (the assembler cannot rebuild them): no hit ever answers
// with empty content.
func TestStreamedAudioIsNeverStoredEmpty(t *testing.T) {
	var calls atomic.Int32
	var logs logtest.Buffer
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = audioUpstream(&calls)
		o.logs = &logs
	})
	ctx := context.Background()
	asked := `{"model":"gpt-4o-audio-preview","stream":true,"modalities":["text","audio"],"audio":{"voice":"alloy","format":"pcm16"},"messages":[{"role":"user","content":"spoken hello"}]}`
	unasked := `{"model":"gpt-4o-audio-preview","stream":true,"messages":[{"role":"user","content":"spoken, unannounced"}]}`
	for _, tt := range []struct {
		name, body, cache string
	}{
		{"modalities audio", asked, cacheBypass},
		{"audio deltas unannounced", unasked, cacheMiss},
	} {
		for i := range 2 {
			a := send(ctx, h.gw.URL, acmeKey, tt.body)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != tt.cache || !strings.Contains(a.body, `"transcript":"lo"`) || !strings.Contains(a.body, "[DONE]") {
				t.Errorf("%s, request %d: %d %s %s", tt.name, i, a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			// A non-streaming request for the same prompt finds no entry.
			plain := strings.Replace(tt.body, `"stream":true,`, "", 1)
			if a := send(ctx, h.gw.URL, acmeKey, plain); a.header.Get("X-Corral-Cache") == cacheHit {
				t.Errorf("%s: a stored answer: %s", tt.name, a.body)
			}
		}
	}
	if n := calls.Load(); n != 8 {
		t.Errorf("%d upstream calls for 8 requests; want 8 (nothing stored)", n)
	}
	if !strings.Contains(logs.String(), `"bypass_reason":"audio output"`) {
		t.Errorf("no access line names the bypass reason:\n%s", logs.String())
	}
}
