package responses

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/corralhq/corral/internal/wire/sse"
)

// maxPiece bounds the text of one replayed delta, in bytes, so no SSE
// data line outgrows the fixed line buffers some clients read into.
const maxPiece = 8 << 10

// replayer builds the events of one replay; sequence numbers start at 0.
type replayer struct {
	events [][]byte
	seq    int
	err    error
}

// emit appends one typed event. fields must not hold "type" or
// "sequence_number"; they are added here.
func (r *replayer) emit(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = r.seq
	r.seq++
	b, err := json.Marshal(fields)
	if err != nil && r.err == nil {
		r.err = err
	}
	r.events = append(r.events, sse.Typed(typ, b))
}

// Replay renders a stored response as the event stream a streaming client
// of the Responses API receives: response.created and response.in_progress
// (the response in_progress, with no output and no usage), then for every
// output item in order: response.output_item.added (the item in_progress,
// without its content), for a message each content part's
// response.content_part.added, its text as response.output_text.delta
// pieces (or response.refusal.delta for a refusal) and the .done events,
// for a function call its arguments as response.function_call_arguments
// delta and done, for a reasoning item its summary parts the same way,
// then response.output_item.done with the item as stored; finally
// response.completed with the stored response. sequence_number counts
// from 0. Items and parts of types Corral does not know are replayed as
// added and done with the stored item, so nothing is lost.
func Replay(body []byte) ([][]byte, error) {
	compact := bytes.NewBuffer(make([]byte, 0, len(body)))
	if err := json.Compact(compact, body); err != nil {
		return nil, fmt.Errorf("responses: replay: %w", err)
	}
	var resp map[string]json.RawMessage
	if err := json.Unmarshal(compact.Bytes(), &resp); err != nil {
		return nil, fmt.Errorf("responses: replay: %w", err)
	}
	var output []json.RawMessage
	if raw, ok := resp["output"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &output); err != nil {
			return nil, fmt.Errorf("responses: replay: output: %w", err)
		}
	}
	pending := make(map[string]json.RawMessage, len(resp))
	for k, v := range resp {
		pending[k] = v
	}
	pending["status"] = json.RawMessage(`"in_progress"`)
	pending["output"] = json.RawMessage(`[]`)
	pending["usage"] = json.RawMessage(`null`)

	r := &replayer{events: make([][]byte, 0, 6+6*len(output))}
	r.emit("response.created", map[string]any{"response": pending})
	r.emit("response.in_progress", map[string]any{"response": pending})
	for i, raw := range output {
		r.item(i, raw)
	}
	r.emit("response.completed", map[string]any{"response": json.RawMessage(compact.Bytes())})
	if r.err != nil {
		return nil, fmt.Errorf("responses: replay: %w", r.err)
	}
	return r.events, nil
}

// item replays one output item.
func (r *replayer) item(i int, raw json.RawMessage) {
	var it map[string]json.RawMessage
	if json.Unmarshal(raw, &it) != nil {
		r.emit("response.output_item.added", map[string]any{"output_index": i, "item": raw})
		r.emit("response.output_item.done", map[string]any{"output_index": i, "item": raw})
		return
	}
	typ, id := str(it["type"]), str(it["id"])
	open := make(map[string]json.RawMessage, len(it))
	for k, v := range it {
		open[k] = v
	}
	if _, ok := it["status"]; ok {
		open["status"] = json.RawMessage(`"in_progress"`)
	}
	switch typ {
	case "message":
		open["content"] = json.RawMessage(`[]`)
	case "function_call", "custom_tool_call":
		if _, ok := it["arguments"]; ok {
			open["arguments"] = json.RawMessage(`""`)
		}
		if _, ok := it["input"]; ok {
			open["input"] = json.RawMessage(`""`)
		}
	case "reasoning":
		if _, ok := it["summary"]; ok {
			open["summary"] = json.RawMessage(`[]`)
		}
	}
	r.emit("response.output_item.added", map[string]any{"output_index": i, "item": open})
	switch typ {
	case "message":
		var parts []json.RawMessage
		_ = json.Unmarshal(it["content"], &parts)
		for j, p := range parts {
			r.part(id, i, j, p)
		}
	case "function_call":
		args := str(it["arguments"])
		for _, piece := range sse.Pieces(args, maxPiece) {
			r.emit("response.function_call_arguments.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece})
		}
		r.emit("response.function_call_arguments.done", map[string]any{"item_id": id, "output_index": i, "arguments": args})
	case "custom_tool_call":
		in := str(it["input"])
		for _, piece := range sse.Pieces(in, maxPiece) {
			r.emit("response.custom_tool_call_input.delta", map[string]any{"item_id": id, "output_index": i, "delta": piece})
		}
		r.emit("response.custom_tool_call_input.done", map[string]any{"item_id": id, "output_index": i, "input": in})
	case "reasoning":
		var summary []json.RawMessage
		_ = json.Unmarshal(it["summary"], &summary)
		for k, s := range summary {
			var part struct {
				Text string `json:"text"`
			}
			_ = json.Unmarshal(s, &part)
			r.emit("response.reasoning_summary_part.added", map[string]any{"item_id": id, "output_index": i, "summary_index": k,
				"part": map[string]string{"type": "summary_text", "text": ""}})
			for _, piece := range sse.Pieces(part.Text, maxPiece) {
				r.emit("response.reasoning_summary_text.delta", map[string]any{"item_id": id, "output_index": i, "summary_index": k, "delta": piece})
			}
			r.emit("response.reasoning_summary_text.done", map[string]any{"item_id": id, "output_index": i, "summary_index": k, "text": part.Text})
			r.emit("response.reasoning_summary_part.done", map[string]any{"item_id": id, "output_index": i, "summary_index": k, "part": s})
		}
	}
	r.emit("response.output_item.done", map[string]any{"output_index": i, "item": raw})
}

// part replays one content part of message item id.
func (r *replayer) part(id string, i, j int, raw json.RawMessage) {
	var p map[string]json.RawMessage
	_ = json.Unmarshal(raw, &p)
	loc := func(m map[string]any) map[string]any {
		m["item_id"], m["output_index"], m["content_index"] = id, i, j
		return m
	}
	switch str(p["type"]) {
	case "output_text":
		text := str(p["text"])
		empty := map[string]json.RawMessage{"type": json.RawMessage(`"output_text"`), "text": json.RawMessage(`""`), "annotations": json.RawMessage(`[]`)}
		r.emit("response.content_part.added", loc(map[string]any{"part": empty}))
		for _, piece := range sse.Pieces(text, maxPiece) {
			r.emit("response.output_text.delta", loc(map[string]any{"delta": piece, "logprobs": []any{}}))
		}
		r.emit("response.output_text.done", loc(map[string]any{"text": text, "logprobs": []any{}}))
	case "refusal":
		text := str(p["refusal"])
		r.emit("response.content_part.added", loc(map[string]any{"part": map[string]string{"type": "refusal", "refusal": ""}}))
		for _, piece := range sse.Pieces(text, maxPiece) {
			r.emit("response.refusal.delta", loc(map[string]any{"delta": piece}))
		}
		r.emit("response.refusal.done", loc(map[string]any{"refusal": text}))
	default:
		r.emit("response.content_part.added", loc(map[string]any{"part": raw}))
	}
	r.emit("response.content_part.done", loc(map[string]any{"part": raw}))
}

// str decodes a JSON string, "" for anything else.
func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
