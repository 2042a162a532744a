package server

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
)

// spacedToolUpstream answers /v1/messages as Anthropic does: a tool_use
// whose input_json_delta pieces carry spaces, or a Message whose input has
// them, counting the calls.
func spacedToolUpstream(calls *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/messages" {
				next.ServeHTTP(w, r)
				return
			}
			calls.Add(1)
			body, _ := io.ReadAll(r.Body)
			msg := `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-tool","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":1}}`
			if !strings.Contains(string(body), `"stream":true`) {
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, `{"id":"msg_01","type":"message","role":"assistant","model":"claude-sonnet-4-5-tool","content":[{"type":"tool_use","id":"toolu_01","name":"get_weather","input": {"location": "San Francisco, CA", "unit": "celsius"}}],"stop_reason":"tool_use","stop_sequence":null,"usage":{"input_tokens":12,"output_tokens":20}}`)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
			ev("message_start", `{"type":"message_start","message":`+msg+`}`)
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_01","name":"get_weather","input":{}}}`)
			for _, p := range []string{`{"location": "San Fra`, `ncisco, CA", `, `"unit": "celsius"}`} {
				ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":%q}}`, p))
			}
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"tool_use","stop_sequence":null},"usage":{"output_tokens":20}}`)
			ev("message_stop", `{"type":"message_stop"}`)
		})
	}
}

// TestToolCallReplayKeepsInputBytes: a tool input Anthropic streamed or
// answered with spaces reaches the client of a replay byte for byte as the
// first answer carried it, streamed or not.
func TestToolCallReplayKeepsInputBytes(t *testing.T) {
	var calls atomic.Int32
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.wrapUpstream = spacedToolUpstream(&calls) })
	c := claudeClient(h.gw.URL, acmeKey)
	ctx := t.Context()
	streamed := func(prompt string) (string, string, string) {
		var raw *http.Response
		st := c.Messages.NewStreaming(ctx, messagesToolParams(prompt), aoption.WithResponseInto(&raw))
		var acc anthropic.Message
		var partial strings.Builder
		for st.Next() {
			ev := st.Current()
			if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
				partial.WriteString(ev.Delta.PartialJSON)
			}
			if err := acc.Accumulate(ev); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := st.Err(); err != nil || len(acc.Content) != 1 {
			t.Fatalf("stream: %v %+v", err, acc)
		}
		return string(acc.Content[0].Input), partial.String(), raw.Header.Get("X-Corral-Cache")
	}
	plain := func(prompt string) (string, string) {
		var raw *http.Response
		m, err := c.Messages.New(ctx, messagesToolParams(prompt), aoption.WithResponseInto(&raw))
		if err != nil || len(m.Content) != 1 {
			t.Fatalf("New: %v %+v", err, m)
		}
		return string(m.Content[0].Input), raw.Header.Get("X-Corral-Cache")
	}
	const spaced = `{"location": "San Francisco, CA", "unit": "celsius"}`
	in1, p1, c1 := streamed("weather in Paris")
	in2, p2, c2 := streamed("weather in Paris")
	if c1 != "MISS" || c2 != "HIT" || in1 != spaced || in2 != in1 || p1 != spaced || p2 != p1 {
		t.Errorf("streamed %s %q %q, replayed %s %q %q, want %q", c1, in1, p1, c2, in2, p2, spaced)
	}
	in3, _ := plain("weather in Paris")
	if in3 != spaced {
		t.Errorf("Message from a streamed answer: input %q, want %q", in3, spaced)
	}
	in4, c4 := plain("weather in Rome")
	in5, p5, c5 := streamed("weather in Rome")
	if c4 != "MISS" || c5 != "HIT" || in4 != spaced || in5 != spaced || p5 != spaced {
		t.Errorf("answered %s %q, replayed %s %q %q, want %q", c4, in4, c5, in5, p5, spaced)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("upstream calls %d, want 2", n)
	}
}
