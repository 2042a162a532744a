package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/wire/openai"
)

// TestSharedReplayKeepsEachRequestsShape: streamed hits of one large
// entry share its rendering only with requests that would render it the
// same: a client asking for the usage chunk and one that did not each get
// their own shape, in any order.
func TestSharedReplayKeepsEachRequestsShape(t *testing.T) {
	reply := strings.Repeat("shared ", 2*replayShareMin/7)
	answer := fmt.Sprintf(`{"id":"chatcmpl-shape","object":"chat.completion","created":1,"model":"gpt-4o-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":3,"completion_tokens":5,"total_tokens":8}}`, reply)
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, answer)
			})
		}
	})
	const prompt = `"model":"gpt-4o-mini","messages":[{"role":"user","content":"shape"}]`
	if a := send(context.Background(), h.gw.URL, acmeKey, "{"+prompt+"}"); a.status != 200 {
		t.Fatalf("storing the answer: %d", a.status)
	}
	usageChunk := `"choices":[],"usage":{"prompt_tokens":3`
	tests := []struct {
		give      string
		wantUsage bool
	}{
		{`{"stream":true,"stream_options":{"include_usage":true},` + prompt + `}`, true},
		{`{"stream":true,` + prompt + `}`, false},
		{`{"stream":true,"stream_options":{"include_usage":true},` + prompt + `}`, true},
		{`{"stream":true,` + prompt + `}`, false},
	}
	for i, tt := range tests {
		a := send(context.Background(), h.gw.URL, acmeKey, tt.give)
		if a.status != 200 || a.header.Get("X-Corral-Cache") != "HIT" || !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
			t.Fatalf("request %d: %d %q, ends %q", i, a.status, a.header.Get("X-Corral-Cache"), a.body[max(0, len(a.body)-40):])
		}
		if got := strings.Contains(a.body, usageChunk); got != tt.wantUsage {
			t.Errorf("request %d (%s): usage chunk %v, want %v", i, tt.give[:60], got, tt.wantUsage)
		}
	}
}

// TestReplaysAreForgotten: the replay table keeps no rendering or entry
// alive and drops a slot once its rendering is collected.
func TestReplaysAreForgotten(t *testing.T) {
	var rs replays
	e := &entry.Entry{Status: 200, Body: []byte(fmt.Sprintf(
		`{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}]}`,
		strings.Repeat("x", replayShareMin)))}
	c := &call{format: openai.Format{}, endpoint: openai.ChatCompletionsPath}
	r := rs.get(c, e)
	if r.err != nil || len(r.events) < 3 {
		t.Fatalf("replay: %d events, %v", len(r.events), r.err)
	}
	if again := rs.get(c, e); again != r {
		t.Error("a second reader rendered the entry again; want the rendering shared")
	}
	runtime.KeepAlive(r)
	slots := func() int {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		return len(rs.m)
	}
	// The clean-up runs on the runtime's own goroutine after a collection.
	for deadline := time.Now().Add(10 * time.Second); slots() > 0; runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the slot of a collected rendering is still in the table")
		}
		runtime.GC()
	}
	runtime.KeepAlive(e)
}
