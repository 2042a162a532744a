package anthropic

import (
	"encoding/json"
	"fmt"

	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// maxPiece bounds the text of one replayed delta, in bytes.
const maxPiece = 8 << 10

// Replay renders a stored Message as the events a streaming client
// receives: message_start (the message without content, stop reason, and
// with its input usage), for each content block content_block_start (text
// empty, tool input {}, thinking and signature empty), its deltas
// (text_delta pieces, the tool input as one input_json_delta, thinking_delta
// and signature_delta) and content_block_stop, then message_delta (stop
// reason, stop sequence, output tokens) and message_stop. Blocks of other
// kinds start as stored and stop.
func Replay(body []byte) ([][]byte, error) {
	// Not compacted first: a tool input is replayed with the bytes stored.
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(body, &msg); err != nil {
		return nil, fmt.Errorf("anthropic: replay: %w", err)
	}
	var content []map[string]json.RawMessage
	if raw, ok := msg["content"]; ok {
		if err := json.Unmarshal(raw, &content); err != nil {
			return nil, fmt.Errorf("anthropic: replay: content: %w", err)
		}
	}
	var u usage
	_ = json.Unmarshal(msg["usage"], &u)

	var events [][]byte
	emit := func(typ string, fields map[string]any) {
		fields["type"] = typ
		b, _ := json.Marshal(fields)
		events = append(events, sse.Typed(typ, b))
	}
	start := make(map[string]json.RawMessage, len(msg))
	for k, v := range msg {
		start[k] = v
	}
	start["content"] = json.RawMessage(`[]`)
	start["stop_reason"], start["stop_sequence"] = json.RawMessage(`null`), json.RawMessage(`null`)
	startUsage := u
	one := wire.Count(1)
	startUsage.OutputTokens = &one
	start["usage"] = mustJSON(startUsage)
	emit("message_start", map[string]any{"message": start})
	for i, b := range content {
		typ := str(b["type"])
		open := make(map[string]json.RawMessage, len(b))
		for k, v := range b {
			open[k] = v
		}
		switch typ {
		case "text":
			open["text"] = json.RawMessage(`""`)
			delete(open, "citations")
		case "thinking":
			open["thinking"], open["signature"] = json.RawMessage(`""`), json.RawMessage(`""`)
		case "tool_use", "server_tool_use", "mcp_tool_use":
			open["input"] = json.RawMessage(`{}`)
		}
		emit("content_block_start", map[string]any{"index": i, "content_block": open})
		switch typ {
		case "text":
			var cites []json.RawMessage
			_ = json.Unmarshal(b["citations"], &cites)
			for _, c := range cites {
				emit("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "citations_delta", "citation": c}})
			}
			for _, p := range sse.Pieces(str(b["text"]), maxPiece) {
				emit("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": p}})
			}
		case "thinking":
			for _, p := range sse.Pieces(str(b["thinking"]), maxPiece) {
				emit("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": p}})
			}
			emit("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "signature_delta", "signature": str(b["signature"])}})
		case "tool_use", "server_tool_use", "mcp_tool_use":
			in := string(b["input"])
			if in == "" || in == "null" {
				in = "{}"
			}
			emit("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": in}})
		}
		emit("content_block_stop", map[string]any{"index": i})
	}
	delta := map[string]json.RawMessage{"stop_reason": nullIfMissing(msg["stop_reason"]), "stop_sequence": nullIfMissing(msg["stop_sequence"])}
	out := map[string]any{"output_tokens": 0}
	if u.OutputTokens != nil {
		out["output_tokens"] = *u.OutputTokens
	}
	emit("message_delta", map[string]any{"delta": delta, "usage": out})
	emit("message_stop", map[string]any{})
	return events, nil
}

func nullIfMissing(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 {
		return json.RawMessage(`null`)
	}
	return raw
}
