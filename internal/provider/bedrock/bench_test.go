package bedrock

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// BenchmarkSign is SigV4 for one typical Messages call: a 2 KB body, the
// headers Corral sends, an inference profile id in the path.
func BenchmarkSign(b *testing.B) {
	s := newSigner(credentials.NewStaticCredentialsProvider("AKIAFAKE", "secret", "session-token"), "us-east-1", nil)
	body := []byte(`{"max_tokens":1024,"messages":[{"role":"user","content":"` + strings.Repeat("lorem ipsum ", 2000/12) + `"}],"anthropic_version":"bedrock-2023-05-31"}`)
	req, _ := http.NewRequest(http.MethodPost, "https://bedrock-runtime.us-east-1.amazonaws.com/model/us.anthropic.claude-sonnet-4-5-20250929-v1:0/invoke", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "Anthropic/Go 2.15.0")
	req.Header.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Authorize(b.Context(), req, body); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecodeStream is one typical streamed answer (about 300 words:
// message_start, a text block of 300 deltas, the end), decoded from
// Bedrock's event stream into Anthropic SSE as the server reads it.
func BenchmarkDecodeStream(b *testing.B) {
	var events [][]byte
	m := func(v any) { j, _ := json.Marshal(v); events = append(events, j) }
	m(map[string]any{"type": "message_start", "message": map[string]any{"id": "msg_bdrk_1", "type": "message", "role": "assistant",
		"model": "claude-sonnet-4-5-20250929", "content": []any{}, "stop_reason": nil, "usage": map[string]any{"input_tokens": 25, "output_tokens": 1}}})
	m(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
	for range 300 {
		m(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "word "}})
	}
	m(map[string]any{"type": "content_block_stop", "index": 0})
	m(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn"}, "usage": map[string]any{"output_tokens": 300}})
	m(map[string]any{"type": "message_stop", "amazon-bedrock-invocationMetrics": map[string]any{"inputTokenCount": 25, "outputTokenCount": 300}})
	var wire bytes.Buffer
	enc := eventstream.NewEncoder()
	for i, ev := range events {
		payload, _ := json.Marshal(map[string]string{"bytes": base64.StdEncoding.EncodeToString(ev), "p": strings.Repeat("x", 1+i%40)})
		msg := eventstream.Message{Payload: payload}
		msg.Headers.Set(":event-type", eventstream.StringValue("chunk"))
		msg.Headers.Set(":content-type", eventstream.StringValue("application/json"))
		msg.Headers.Set(":message-type", eventstream.StringValue("event"))
		if err := enc.Encode(&wire, msg); err != nil {
			b.Fatal(err)
		}
	}
	raw := wire.Bytes()
	buf := make([]byte, 32<<10)
	b.SetBytes(int64(len(raw)))
	b.ReportAllocs()
	start := time.Now()
	for b.Loop() {
		body := newSSEBody(io.NopCloser(bytes.NewReader(raw)))
		if _, err := io.CopyBuffer(io.Discard, onlyReader{body}, buf); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(b.N)/float64(len(events)), "ns/event")
}

// onlyReader hides WriteTo, as the server's copy does.
type onlyReader struct{ io.Reader }
