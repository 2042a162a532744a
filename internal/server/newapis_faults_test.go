package server

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestNewAPIsBadInput: bodies the Responses and Messages routes cannot
// key are refused with a 400 in each API's own error shape, and nothing
// goes upstream.
func TestNewAPIsBadInput(t *testing.T) {
	h := newHarness(t, withAnthropic)
	ctx := context.Background()
	for _, body := range []string{`not json`, `[1,2]`, `{"input":"no model"}`, `{"model":"m","seed":1e1234567890123456789}`, `{"model":"m","a":1}x`} {
		r := sendTo(ctx, h.gw.URL+"/v1/responses", acmeKey, body)
		if r.status != 400 || !strings.HasPrefix(r.body, `{"error":{`) {
			t.Errorf("responses %q: %d %s", body, r.status, r.body)
		}
		m := postMessages(ctx, h.gw.URL+"/v1/messages", acmeKey, strings.Replace(body, `"input":"no model"`, `"max_tokens":5`, 1))
		if m.status != 400 || !strings.HasPrefix(m.body, `{"type":"error","error":{"type":"invalid_request_error"`) {
			t.Errorf("messages %q: %d %s", body, m.status, m.body)
		}
	}
	if n := responsesCalls(h) + messagesCalls(h); n != 0 {
		t.Errorf("refused bodies made %d upstream calls", n)
	}
}

// TestNewAPIsThroughARedisOutage: with Redis stopped, Responses and
// Messages calls (plain and streamed) are answered by in-process
// coalescing within a bounded time, never a 5xx.
func TestNewAPIsThroughARedisOutage(t *testing.T) {
	h, rs := distributed(t, 2, withAnthropic)
	if !rs.Stoppable() {
		t.Skip("CORRAL_TEST_REDIS_URL points at a server this test cannot stop")
	}
	rs.Stop()
	for i := range 4 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		base := h.bases()[i%2]
		stream := ""
		if i%2 == 1 {
			stream = `,"stream":true`
		}
		r := sendTo(ctx, base+"/v1/responses", acmeKey, fmt.Sprintf(`{"model":"gpt-4o-mini","input":"outage %d"%s}`, i, stream))
		m := postMessages(ctx, base+"/v1/messages", acmeKey, fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":16,"messages":[{"role":"user","content":"outage %d"}]%s}`, i, stream))
		cancel()
		if r.err != nil || r.status != 200 || !strings.Contains(r.body, "mock reply to: outage") {
			t.Errorf("responses %d during the outage: %v %d %s", i, r.err, r.status, r.body)
		}
		got := m.body
		if stream != "" {
			got = text(m.body) // the streamed text comes in pieces
		}
		if m.err != nil || m.status != 200 || !strings.Contains(got, "mock reply to: outage") {
			t.Errorf("messages %d during the outage: %v %d %s", i, m.err, m.status, m.body)
		}
	}
}
