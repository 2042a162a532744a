package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/corralhq/corral/internal/jsonstr"
)

// maxReplayPiece bounds the text of one replayed delta, in bytes. A
// stored answer can be long, and some SSE clients read a line into a
// fixed buffer (bufio.Scanner's default is 64 KiB), so long text is cut
// into several deltas, each on a line well under that.
const maxReplayPiece = 8 << 10

// storedBody is the part of a non-streaming completion body that Replay
// renders. RawMessage fields are passed through as they are.
type storedBody struct {
	ID                string          `json:"id"`
	Created           json.RawMessage `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint json.RawMessage `json:"system_fingerprint"`
	ServiceTier       json.RawMessage `json:"service_tier"`
	Choices           []storedChoice  `json:"choices"`
	Usage             json.RawMessage `json:"usage"`
}

type storedChoice struct {
	Index        int             `json:"index"`
	Message      *storedMessage  `json:"message"` // chat
	Text         string          `json:"text"`    // completions
	Logprobs     json.RawMessage `json:"logprobs"`
	FinishReason json.RawMessage `json:"finish_reason"`
}

// storedMessage is a stored chat message; its content may be null.
type storedMessage struct {
	messageParts
	Content *string `json:"content"`
}

// Replay renders a stored non-streaming body from endpoint
// (ChatCompletionsPath or CompletionsPath) as the SSE events a streaming
// client expects: each element is one complete "data: …\n\n" event, the
// last is "data: [DONE]\n\n". The events share one backing array; they are
// read-only.
//
// Chat choices are replayed in OpenAI's shape: a role chunk (delta
// {role, content: "" or null, refusal: null}), then reasoning_content,
// content, refusal, annotations, each tool call (id, type and name with
// the first arguments piece, further pieces by index) and function_call,
// then an empty delta with the finish_reason. Legacy completions get text
// chunks with the finish_reason on the last. Text over 8 KiB is cut into
// several deltas; logprobs ride whole on the first content chunk (or the
// finish chunk when there is no content).
//
// With includeUsage every chunk carries "usage": null and a last chunk
// with "choices": [] carries the stored usage, as OpenAI does for
// stream_options.include_usage; a body without usage gets no usage chunk.
func Replay(endpoint string, body []byte, includeUsage bool) ([][]byte, error) {
	var chat bool
	switch endpoint {
	case ChatCompletionsPath:
		chat = true
	case CompletionsPath:
	default:
		return nil, fmt.Errorf("%w: %q", ErrUnsupportedEndpoint, endpoint)
	}
	// Compact first: an upstream's non-streaming body is often
	// pretty-printed, and raw values copied from it must not put a newline
	// inside an SSE data line.
	compact := bytes.NewBuffer(make([]byte, 0, len(body)))
	if err := json.Compact(compact, body); err != nil {
		return nil, fmt.Errorf("upstream: replay: %w", err)
	}
	var sb storedBody
	if err := json.Unmarshal(compact.Bytes(), &sb); err != nil {
		return nil, fmt.Errorf("upstream: replay: %w", err)
	}
	if len(sb.Choices) == 0 {
		return nil, errors.New("upstream: replay: body has no choices")
	}

	r := replayer{suffix: "]}\n\n"}
	if includeUsage {
		r.suffix = "],\"usage\":null}\n\n"
	}
	r.prefix = sb.appendPrefix(make([]byte, 0, 160+len(sb.ID)+len(sb.Model)), chat)
	r.buf = make([]byte, 0, 2*len(body)+len(sb.Choices)*8*(len(r.prefix)+96))

	for i := range sb.Choices {
		c := &sb.Choices[i]
		if chat {
			if c.Message == nil {
				return nil, fmt.Errorf("upstream: replay: choice %d has no message", c.Index)
			}
			r.chatChoice(c)
		} else {
			r.textChoice(c)
		}
	}
	if includeUsage && !isNull(sb.Usage) {
		r.buf = append(r.buf, r.prefix...)
		r.buf = append(r.buf, `],"usage":`...)
		r.buf = append(r.buf, sb.Usage...)
		r.buf = append(r.buf, "}\n\n"...)
		r.ends = append(r.ends, len(r.buf))
	}
	r.buf = append(r.buf, "data: [DONE]\n\n"...)
	r.ends = append(r.ends, len(r.buf))

	events := make([][]byte, len(r.ends))
	start := 0
	for i, end := range r.ends {
		events[i] = r.buf[start:end:end]
		start = end
	}
	return events, nil
}

// appendPrefix appends the part every chunk shares, up to and including
// `"choices":[`.
func (sb *storedBody) appendPrefix(b []byte, chat bool) []byte {
	b = append(b, `data: {"id":`...)
	b = jsonstr.Append(b, sb.ID)
	if chat {
		b = append(b, `,"object":"chat.completion.chunk","created":`...)
	} else {
		b = append(b, `,"object":"text_completion","created":`...)
	}
	b = appendRawOr(b, sb.Created, "0")
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, sb.Model)
	if !isNull(sb.ServiceTier) {
		b = append(b, `,"service_tier":`...)
		b = append(b, sb.ServiceTier...)
	}
	if chat || !isNull(sb.SystemFingerprint) {
		b = append(b, `,"system_fingerprint":`...)
		b = appendRawOr(b, sb.SystemFingerprint, "null")
	}
	return append(b, `,"choices":[`...)
}

// replayer builds all events in one buffer; ends[i] is where event i ends.
type replayer struct {
	prefix []byte
	suffix string
	buf    []byte
	ends   []int
}

// beginDelta opens a chunk and its choice, up to the delta's contents.
func (r *replayer) beginDelta(index int) {
	r.buf = append(r.buf, r.prefix...)
	r.buf = append(r.buf, `{"index":`...)
	r.buf = strconv.AppendInt(r.buf, int64(index), 10)
	r.buf = append(r.buf, `,"delta":{`...)
}

// endDelta closes the delta and the chunk.
func (r *replayer) endDelta(logprobs, finish json.RawMessage) {
	r.buf = append(r.buf, `},"logprobs":`...)
	r.buf = appendRawOr(r.buf, logprobs, "null")
	r.buf = append(r.buf, `,"finish_reason":`...)
	r.buf = appendRawOr(r.buf, finish, "null")
	r.buf = append(r.buf, '}')
	r.buf = append(r.buf, r.suffix...)
	r.ends = append(r.ends, len(r.buf))
}

// stringDeltas emits s as deltas {"<key>": piece}.
func (r *replayer) stringDeltas(index int, key, s string, logprobs *json.RawMessage) {
	for s != "" {
		var piece string
		piece, s = cutPiece(s)
		r.beginDelta(index)
		r.buf = append(r.buf, key...)
		r.buf = jsonstr.Append(r.buf, piece)
		r.endDelta(*logprobs, nil)
		*logprobs = nil // only on the first piece
	}
}

func (r *replayer) chatChoice(c *storedChoice) {
	m := c.Message
	role := m.Role
	if role == "" {
		role = "assistant"
	}
	r.beginDelta(c.Index)
	r.buf = append(r.buf, `"role":`...)
	r.buf = jsonstr.Append(r.buf, role)
	if m.Content == nil {
		r.buf = append(r.buf, `,"content":null,"refusal":null`...)
	} else {
		r.buf = append(r.buf, `,"content":"","refusal":null`...)
	}
	r.endDelta(nil, nil)

	var none json.RawMessage
	logprobs := c.Logprobs
	if isNull(logprobs) {
		logprobs = nil
	}
	r.stringDeltas(c.Index, `"reasoning_content":`, m.ReasoningContent, &none)
	if m.Content != nil {
		r.stringDeltas(c.Index, `"content":`, *m.Content, &logprobs)
	}
	r.stringDeltas(c.Index, `"refusal":`, m.Refusal, &none)
	if a := bytes.TrimSpace(m.Annotations); len(a) > 2 && a[0] == '[' {
		r.beginDelta(c.Index)
		r.buf = append(r.buf, `"annotations":`...)
		r.buf = append(r.buf, a...)
		r.endDelta(nil, nil)
	}
	for k := range m.ToolCalls {
		tc := &m.ToolCalls[k]
		typ := tc.Type
		if typ == "" {
			typ = "function"
		}
		args := tc.Function.Arguments
		first := true
		for first || args != "" {
			var piece string
			piece, args = cutPiece(args)
			r.beginDelta(c.Index)
			r.buf = append(r.buf, `"tool_calls":[{"index":`...)
			r.buf = strconv.AppendInt(r.buf, int64(k), 10)
			if first {
				r.buf = append(r.buf, `,"id":`...)
				r.buf = jsonstr.Append(r.buf, tc.ID)
				r.buf = append(r.buf, `,"type":`...)
				r.buf = jsonstr.Append(r.buf, typ)
				r.buf = append(r.buf, `,"function":{"name":`...)
				r.buf = jsonstr.Append(r.buf, tc.Function.Name)
				r.buf = append(r.buf, `,"arguments":`...)
			} else {
				r.buf = append(r.buf, `,"function":{"arguments":`...)
			}
			r.buf = jsonstr.Append(r.buf, piece)
			r.buf = append(r.buf, "}}]"...)
			r.endDelta(nil, nil)
			first = false
		}
	}
	if fc := m.FunctionCall; fc != nil {
		args := fc.Arguments
		first := true
		for first || args != "" {
			var piece string
			piece, args = cutPiece(args)
			r.beginDelta(c.Index)
			r.buf = append(r.buf, `"function_call":{`...)
			if first {
				r.buf = append(r.buf, `"name":`...)
				r.buf = jsonstr.Append(r.buf, fc.Name)
				r.buf = append(r.buf, ',')
			}
			r.buf = append(r.buf, `"arguments":`...)
			r.buf = jsonstr.Append(r.buf, piece)
			r.buf = append(r.buf, '}')
			r.endDelta(nil, nil)
			first = false
		}
	}
	r.beginDelta(c.Index)
	r.endDelta(logprobs, c.FinishReason) // logprobs is nil here when content carried it
}

func (r *replayer) textChoice(c *storedChoice) {
	text := c.Text
	logprobs := c.Logprobs
	for first := true; first || text != ""; first = false {
		var piece string
		piece, text = cutPiece(text)
		r.buf = append(r.buf, r.prefix...)
		r.buf = append(r.buf, `{"text":`...)
		r.buf = jsonstr.Append(r.buf, piece)
		r.buf = append(r.buf, `,"index":`...)
		r.buf = strconv.AppendInt(r.buf, int64(c.Index), 10)
		r.buf = append(r.buf, `,"logprobs":`...)
		r.buf = appendRawOr(r.buf, logprobs, "null")
		logprobs = nil
		r.buf = append(r.buf, `,"finish_reason":`...)
		if text == "" {
			r.buf = appendRawOr(r.buf, c.FinishReason, "null")
		} else {
			r.buf = append(r.buf, "null"...)
		}
		r.buf = append(r.buf, '}')
		r.buf = append(r.buf, r.suffix...)
		r.ends = append(r.ends, len(r.buf))
	}
}

// cutPiece splits off up to maxReplayPiece bytes of s at a rune boundary.
func cutPiece(s string) (piece, rest string) {
	if len(s) <= maxReplayPiece {
		return s, ""
	}
	n := maxReplayPiece
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n == 0 { // not UTF-8 at all; any cut will do
		n = maxReplayPiece
	}
	return s[:n], s[n:]
}
