package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// ErrIncomplete is Finish's answer for a stream that did not end with
// message_stop, or that carried an error event.
var ErrIncomplete = errors.New("anthropic: stream did not end with message_stop")

// maxBlocks bounds the content blocks of one assembled message.
const maxBlocks = 4096

// block is one content block being assembled.
type block struct {
	start    map[string]json.RawMessage // content_block_start's content_block
	typ      string
	text     strings.Builder // text, thinking
	partial  strings.Builder // tool_use input_json_delta pieces
	sig      strings.Builder // thinking signature_delta pieces
	citation []json.RawMessage
	stopped  bool
}

// Assembler rebuilds a Message from its stream's events.
type Assembler struct {
	message map[string]json.RawMessage // message_start's message
	usage   usage
	// usageBad: an event's usage held a figure wire.Count refuses, so the
	// stream's usage is unread, whatever the other events said.
	usageBad bool
	blocks   []*block
	delta    map[string]json.RawMessage // message_delta's delta (stop_reason, ...)
	ended    bool
	err      error
}

// Add implements wire.Assembler.
func (a *Assembler) Add(ev []byte) bool {
	if a.ended {
		return true
	}
	typ := sse.Type(ev)
	data := sse.Data(ev)
	switch typ {
	case "ping", "":
		return false
	case "error":
		a.fail(errors.New("anthropic: error event in the stream"))
		a.ended = true
		return true
	case "message_stop":
		a.ended = true
		return true
	}
	if a.err != nil {
		return false
	}
	var v struct {
		Message      map[string]json.RawMessage `json:"message"`
		Index        *int                       `json:"index"`
		ContentBlock map[string]json.RawMessage `json:"content_block"`
		Delta        map[string]json.RawMessage `json:"delta"`
		Usage        json.RawMessage            `json:"usage"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		a.fail(fmt.Errorf("anthropic: event %s: %w", typ, err))
		return false
	}
	switch typ {
	case "message_start":
		if v.Message == nil {
			a.fail(errors.New("anthropic: message_start without a message"))
			return false
		}
		a.message = v.Message
		if raw, ok := v.Message["usage"]; ok && json.Unmarshal(raw, &a.usage) != nil {
			a.usageBad = true
		}
	case "content_block_start":
		if v.Index == nil || *v.Index != len(a.blocks) || *v.Index >= maxBlocks || v.ContentBlock == nil {
			a.fail(errors.New("anthropic: content_block_start out of order"))
			return false
		}
		b := &block{start: v.ContentBlock, typ: str(v.ContentBlock["type"])}
		switch b.typ {
		case "text":
			b.text.WriteString(str(v.ContentBlock["text"]))
		case "thinking":
			b.text.WriteString(str(v.ContentBlock["thinking"]))
			b.sig.WriteString(str(v.ContentBlock["signature"]))
		}
		a.blocks = append(a.blocks, b)
	case "content_block_delta":
		b := a.block(v.Index)
		if b == nil || v.Delta == nil {
			a.fail(errors.New("anthropic: content_block_delta for no open block"))
			return false
		}
		switch str(v.Delta["type"]) {
		case "text_delta":
			b.text.WriteString(str(v.Delta["text"]))
		case "input_json_delta":
			b.partial.WriteString(str(v.Delta["partial_json"]))
		case "thinking_delta":
			b.text.WriteString(str(v.Delta["thinking"]))
		case "signature_delta":
			b.sig.WriteString(str(v.Delta["signature"]))
		case "citations_delta":
			if c, ok := v.Delta["citation"]; ok {
				b.citation = append(b.citation, c)
			}
		}
	case "content_block_stop":
		b := a.block(v.Index)
		if b == nil {
			a.fail(errors.New("anthropic: content_block_stop for no open block"))
			return false
		}
		b.stopped = true
	case "message_delta":
		if v.Delta != nil {
			a.delta = v.Delta
		}
		var du *usage
		if len(v.Usage) > 0 && json.Unmarshal(v.Usage, &du) != nil {
			a.usageBad, du = true, nil
		}
		if du != nil {
			for dst, src := range map[**wire.Count]*wire.Count{
				&a.usage.InputTokens: du.InputTokens, &a.usage.OutputTokens: du.OutputTokens,
				&a.usage.CacheCreationInputTokens: du.CacheCreationInputTokens, &a.usage.CacheReadInputTokens: du.CacheReadInputTokens,
			} {
				if src != nil {
					*dst = src
				}
			}
		}
	}
	return false
}

func (a *Assembler) fail(err error) {
	if a.err == nil {
		a.err = err
	}
}

func (a *Assembler) block(i *int) *block {
	if i == nil || *i < 0 || *i >= len(a.blocks) || a.blocks[*i].stopped {
		return nil
	}
	return a.blocks[*i]
}

// Finish implements wire.Assembler: the Message a non-streaming call
// would have returned, and its usage.
func (a *Assembler) Finish() ([]byte, wire.Usage, error) {
	if a.err != nil {
		return nil, wire.Usage{}, a.err
	}
	if !a.ended || a.message == nil {
		return nil, wire.Usage{}, ErrIncomplete
	}
	content := make([]json.RawMessage, 0, len(a.blocks))
	for _, b := range a.blocks {
		if !b.stopped {
			return nil, wire.Usage{}, ErrIncomplete
		}
		out := make(map[string]json.RawMessage, len(b.start))
		for k, v := range b.start {
			out[k] = v
		}
		switch b.typ {
		case "text":
			out["text"] = mustJSON(b.text.String())
			if len(b.citation) > 0 {
				out["citations"] = mustJSON(b.citation)
			}
		case "thinking":
			out["thinking"] = mustJSON(b.text.String())
			out["signature"] = mustJSON(b.sig.String())
		case "tool_use", "server_tool_use", "mcp_tool_use":
			in := b.partial.String()
			if in == "" {
				in = "{}"
			}
			if !json.Valid([]byte(in)) {
				return nil, wire.Usage{}, errors.New("anthropic: tool input is not JSON")
			}
			out["input"] = json.RawMessage(in)
		}
		content = append(content, verbatimObject(out))
	}
	msg := make(map[string]json.RawMessage, len(a.message)+2)
	for k, v := range a.message {
		msg[k] = v
	}
	msg["content"] = verbatimArray(content)
	for k, v := range a.delta {
		msg[k] = v // stop_reason, stop_sequence, and any field Corral does not know
	}
	msg["usage"] = mustJSON(a.usage)
	body := verbatimObject(msg)
	u := a.usage.wire()
	if a.usageBad {
		u = wire.Usage{}
	}
	if u.Known {
		u.Model = str(a.message["model"])
	}
	return body, u, nil
}

// verbatimObject writes fields as a JSON object, keys sorted, each value's
// bytes as they are: json.Marshal compacts a json.RawMessage, and a tool
// input must reach a client byte for byte as the model wrote it, spaces
// included, or a replay differs from the answer it replays.
func verbatimObject(fields map[string]json.RawMessage) json.RawMessage {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mustJSON(k))
		b.WriteByte(':')
		b.Write(fields[k])
	}
	b.WriteByte('}')
	return b.Bytes()
}

// verbatimArray writes items as a JSON array, each item's bytes as they are.
func verbatimArray(items []json.RawMessage) json.RawMessage {
	b := []byte{'['}
	for i, it := range items {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, it...)
	}
	return append(b, ']')
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func str(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}
