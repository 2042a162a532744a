package bedrock_test

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/provider"
	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
	"github.com/corralhq/corral/internal/upstream"
)

// TestStreamToSSE: Bedrock's event stream reaches the client as
// Anthropic's SSE, event for event and byte for byte of each event.
func TestStreamToSSE(t *testing.T) {
	fake := bedrocktest.New(t, bedrocktest.Options{})
	c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
	code, h, body := do(t, c, "/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"ping"}]}`, nil)
	id := gjsonID(body[len("event: message_start\ndata: "):])
	want := "event: message_start\ndata: " + `{"message":{"content":[],"id":"` + id + `","model":"claude-sonnet-4-5-20250929","role":"assistant","stop_reason":null,"stop_sequence":null,"type":"message","usage":{"input_tokens":4,"output_tokens":1}},"type":"message_start"}` + "\n\n" +
		"event: content_block_start\ndata: " + `{"content_block":{"text":"","type":"text"},"index":0,"type":"content_block_start"}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"delta":{"text":"bedrock ","type":"text_delta"},"index":0,"type":"content_block_delta"}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"delta":{"text":"reply ","type":"text_delta"},"index":0,"type":"content_block_delta"}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"delta":{"text":"to: ","type":"text_delta"},"index":0,"type":"content_block_delta"}` + "\n\n" +
		"event: content_block_delta\ndata: " + `{"delta":{"text":"ping","type":"text_delta"},"index":0,"type":"content_block_delta"}` + "\n\n" +
		"event: content_block_stop\ndata: " + `{"index":0,"type":"content_block_stop"}` + "\n\n" +
		"event: message_delta\ndata: " + `{"delta":{"stop_reason":"end_turn","stop_sequence":null},"type":"message_delta","usage":{"output_tokens":4}}` + "\n\n" +
		"event: message_stop\ndata: " + `{"amazon-bedrock-invocationMetrics":{"firstByteLatency":97,"inputTokenCount":4,"invocationLatency":412,"outputTokenCount":4},"type":"message_stop"}` + "\n\n"
	if code != 200 || h.Get("Content-Type") != "text/event-stream" || body != want {
		t.Errorf("%d %s\n%s\nwant\n%s", code, h.Get("Content-Type"), body, want)
	}
	if call := fake.Calls()[0]; call.Path != "/model/"+profileID+"/invoke-with-response-stream" {
		t.Errorf("path = %s", call.Path)
	}
}

// TestStreamExceptions: an exception frame before the first event is a
// status in Anthropic's error shape (one the router fails over on, for
// the transient ones); after it, the stream ends with Anthropic's error
// event.
func TestStreamExceptions(t *testing.T) {
	tests := []struct {
		exception string
		after     int
		want      int
		wantBody  string
	}{
		{"throttlingException", 0, 429, `{"type":"error","error":{"type":"rate_limit_error","message":"Too many requests, please wait before trying again."}}`},
		{"serviceUnavailableException", 0, 503, `{"type":"error","error":{"type":"overloaded_error","message":"Bedrock is unable to process your request."}}`},
		{"modelTimeoutException", 0, 408, `{"type":"error","error":{"type":"timeout_error","message":"modelTimeoutException"}}`},
		{"validationException", 0, 400, `{"type":"error","error":{"type":"invalid_request_error","message":"validationException"}}`},
		{"internalServerException", 0, 500, `{"type":"error","error":{"type":"api_error","message":"internalServerException"}}`},
		{"modelStreamErrorException", 0, 500, `{"type":"error","error":{"type":"api_error","message":"The model stream was interrupted."}}`},
		{"modelStreamErrorException", 3, 200, "event: error\ndata: " + `{"type":"error","error":{"type":"api_error","message":"The model stream was interrupted."}}` + "\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.exception, func(t *testing.T) {
			fake := bedrocktest.New(t, bedrocktest.Options{Reply: func(bedrocktest.Call) bedrocktest.Reply {
				return bedrocktest.Reply{Exception: tt.exception, ExceptionAfter: tt.after}
			}})
			c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
			code, h, body := do(t, c, "/messages", `{"model":"claude-sonnet-4-5","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"x"}]}`, nil)
			if code != tt.want {
				t.Errorf("status = %d; want %d", code, tt.want)
			}
			if tt.want == 200 {
				if n := countEvents(body); n != 4 || body[len(body)-len(tt.wantBody):] != tt.wantBody {
					t.Errorf("%d events, body =\n%s", n, body)
				}
				return
			}
			if body != tt.wantBody || h.Get("Content-Type") != "application/json" {
				t.Errorf("body = %s (%s); want %s", body, h.Get("Content-Type"), tt.wantBody)
			}
		})
	}
}

// TestStreamNotBuffered: Do returns, and the client reads the first
// events, while Bedrock still holds the rest of the answer; the rest
// follows when Bedrock sends it.
func TestStreamNotBuffered(t *testing.T) {
	hold := make(chan struct{})
	fake := bedrocktest.New(t, bedrocktest.Options{Reply: func(bedrocktest.Call) bedrocktest.Reply { return bedrocktest.Reply{Hold: hold} }})
	c := newClient(t, fake, provider.Anthropic, bedrocktest.DefaultSecretAccessKey)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	resp, err := c.Do(ctx, upstream.Request{Method: "POST", Path: "/messages", Header: http.Header{}, Model: "claude-sonnet-4-5",
		Body: []byte(`{"model":"claude-sonnet-4-5","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"a b c"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	var got []string
	for len(got) < 3 { // message_start, content_block_start, the first delta: all Bedrock has sent
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if ev, ok := strings.CutPrefix(line, "event: "); ok {
			got = append(got, strings.TrimSpace(ev))
		}
	}
	close(hold)
	rest, err := io.ReadAll(r)
	if err != nil || countEvents(string(rest)) != 8 || !strings.HasSuffix(string(rest), "}\n\n") {
		t.Errorf("first %v; rest (%v):\n%s", got, err, rest)
	}
}
