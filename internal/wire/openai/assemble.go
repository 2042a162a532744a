package openai

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/jsonstr"
	"github.com/corralhq/corral/internal/wire"
)

// Endpoints whose answers can be streamed, as paths below /v1.
const (
	ChatCompletionsPath = "/chat/completions"
	CompletionsPath     = "/completions"
)

var (
	// ErrUnsupportedEndpoint is returned for an endpoint that is never
	// streamed (anything but ChatCompletionsPath and CompletionsPath).
	ErrUnsupportedEndpoint = errors.New("upstream: endpoint is not streamed")
	// ErrErrorEvent is returned by Assembler.Add for an event whose data is
	// an OpenAI error object: the upstream broke the stream on purpose.
	ErrErrorEvent = errors.New("upstream: error event in stream")
	// ErrIncompleteStream is returned by Assembler.Body when the stream did
	// not end cleanly, so there is nothing that may be stored.
	ErrIncompleteStream = errors.New("upstream: stream incomplete")
	// ErrUnassembled is returned by Assembler.Add for a chunk carrying a
	// member the assembler cannot rebuild into the completion (delta.audio,
	// a field of a newer API version, ...): the stream is relayed as it
	// came, but its answer is never stored, since the stored one would
	// lack what the client saw.
	ErrUnassembled = errors.New("upstream: chunk member the assembler cannot rebuild")
)

// Assembler rebuilds the non-streaming completion from a stream's chunks,
// so a streamed miss can be stored as the same body a non-streaming
// request would have got.
//
// What it rebuilds: id, created, model, system_fingerprint, service_tier,
// usage (raw, details included) and per choice the role, content,
// reasoning_content, refusal, annotations, tool_calls, function_call,
// logprobs and finish_reason (for legacy completions: text, logprobs,
// finish_reason). What it drops on purpose, because it describes the
// stream rather than the answer: object, obfuscation (padding), Azure's
// prompt_filter_results and content_filter_results, and OpenRouter's
// provider and native_finish_reason. Any other member with a value (not
// null), at any level of a chunk, makes the answer unstorable
// (ErrUnassembled): a field the assembler does not know how to rebuild
// would be missing from every hit, so the next unknown field is safe
// too (delta.audio was one).
//
// Add copies what it keeps, so data may be reused after it returns. An
// Assembler is not safe for concurrent use.
type Assembler struct {
	chat bool
	err  error // sticky: set by the first failed Add; nothing is stored after it
	done bool  // [DONE] seen

	id          string
	model       string
	created     json.RawMessage
	fingerprint json.RawMessage
	serviceTier json.RawMessage
	usage       json.RawMessage

	choices []*choiceState // in order of first appearance; sorted by Body

	haveHead bool      // id, model and created are known: decode only the tail
	scratch  chunkTail // reused by Add once haveHead
}

// choiceState accumulates one choice, by index.
type choiceState struct {
	index     int
	role      string
	content   strings.Builder // chat content, or completions text
	reasoning strings.Builder
	refusal   strings.Builder
	annots    []byte // elements of delta.annotations arrays, comma-joined
	tools     []*toolState
	fn        *toolState // legacy function_call; only name/args used
	finish    string

	lpSeen bool
	// Chat logprobs: elements of logprobs.content / .refusal, comma-joined.
	lpContent, lpRefusal         []byte
	lpContentSeen, lpRefusalSeen bool
	// Completions logprobs: the four parallel arrays, comma-joined.
	lpTokens, lpTokenLogprobs, lpTop, lpOffset []byte
}

type toolState struct {
	index int
	id    string
	typ   string
	name  strings.Builder
	args  strings.Builder
}

// chunkHead and chunkTail are one stream event's data; both
// chat.completion.chunk and the streamed text_completion decode into them.
// The head fields repeat identically in every chunk, so once they are known
// only the tail is decoded: encoding/json allocates every string it
// decodes, and skipping a field it has no place for allocates nothing.
type chunkHead struct {
	ID                string          `json:"id"`
	Created           json.RawMessage `json:"created"`
	Model             string          `json:"model"`
	SystemFingerprint optRaw          `json:"system_fingerprint"`
	ServiceTier       optRaw          `json:"service_tier"`
	chunkTail
}

type chunkTail struct {
	Choices []chunkChoice `json:"choices"`
	Usage   optRaw        `json:"usage"`
	Error   optRaw        `json:"error"`
	chunkDropped
}

// chunkDropped are the chunk's members the tail decode skips: the head's
// (known once, from the first chunk) and those dropped on purpose. A
// skipped member is neither copied nor allocated.
type chunkDropped struct {
	ID                  skipped `json:"id"`
	Created             skipped `json:"created"`
	Model               skipped `json:"model"`
	SystemFingerprint   skipped `json:"system_fingerprint"`
	ServiceTier         skipped `json:"service_tier"`
	Object              skipped `json:"object"`
	Obfuscation         skipped `json:"obfuscation"`
	PromptFilterResults skipped `json:"prompt_filter_results"`
	Provider            skipped `json:"provider"`
}

// skipped is a member read past without keeping it.
type skipped struct{}

func (*skipped) UnmarshalJSON([]byte) error { return nil }

// optRaw is a json.RawMessage that stays nil for JSON null, which most
// chunks carry for usage: no allocation for it.
type optRaw []byte

func (r *optRaw) UnmarshalJSON(data []byte) error {
	if string(data) != "null" {
		*r = bytes.Clone(data)
	}
	return nil
}

type chunkChoice struct {
	Index        int            `json:"index"`
	Delta        chunkDelta     `json:"delta"` // chat
	Text         string         `json:"text"`  // completions
	Logprobs     *chunkLogprobs `json:"logprobs"`
	FinishReason string         `json:"finish_reason"` // null reads as ""

	ContentFilterResults skipped `json:"content_filter_results"`
	NativeFinishReason   skipped `json:"native_finish_reason"`
}

// messageParts are the fields a chat message (stored) and a chat delta
// (streamed) share: the completion's shape, declared once.
type messageParts struct {
	Role             string           `json:"role"`
	ReasoningContent string           `json:"reasoning_content"`
	Refusal          string           `json:"refusal"`
	Annotations      json.RawMessage  `json:"annotations"`
	ToolCalls        []toolCall       `json:"tool_calls"`
	FunctionCall     *functionPayload `json:"function_call"`
}

// chunkDelta is a chat delta. Content and refusal need no pointer: null
// and "" both add nothing.
type chunkDelta struct {
	messageParts
	Content string `json:"content"`
}

// toolCall is a tool call of a message, or a piece of one in a delta
// (which carries its index).
type toolCall struct {
	Index    *int            `json:"index"`
	ID       string          `json:"id"`
	Type     string          `json:"type"`
	Function functionPayload `json:"function"`
}

type functionPayload struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chunkLogprobs covers both shapes: chat (content, refusal) and legacy
// completions (tokens, token_logprobs, top_logprobs, text_offset).
type chunkLogprobs struct {
	Content       json.RawMessage `json:"content"`
	Refusal       json.RawMessage `json:"refusal"`
	Tokens        json.RawMessage `json:"tokens"`
	TokenLogprobs json.RawMessage `json:"token_logprobs"`
	TopLogprobs   json.RawMessage `json:"top_logprobs"`
	TextOffset    json.RawMessage `json:"text_offset"`
}

// NewAssembler returns an Assembler for a stream from endpoint,
// ChatCompletionsPath or CompletionsPath. For any other endpoint every Add
// returns ErrUnsupportedEndpoint.
func NewAssembler(endpoint string) *Assembler {
	a := &Assembler{}
	switch endpoint {
	case ChatCompletionsPath:
		a.chat = true
	case CompletionsPath:
	default:
		a.err = fmt.Errorf("%w: %q", ErrUnsupportedEndpoint, endpoint)
	}
	return a
}

// Add takes the data of one SSE event (the bytes after "data: ", as
// returned by Data). "[DONE]" marks the clean end; empty data (a comment or
// keep-alive event) is ignored. Data that is an error object, is not a JSON
// object, or comes after [DONE] makes Add return an error, after which the
// stream can never be Complete.
func (a *Assembler) Add(data []byte) error {
	if a.err != nil {
		return a.err
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil
	}
	if a.done {
		a.err = errors.New("upstream: assemble: data after [DONE]")
		return a.err
	}
	if IsDone(data) {
		a.done = true
		return nil
	}
	if data[0] != '{' {
		a.err = errors.New("upstream: assemble: chunk is not a JSON object")
		return a.err
	}
	var (
		tail *chunkTail
		err  error
	)
	if a.haveHead {
		// Reuse the choices' backing array. encoding/json decodes into
		// existing elements without zeroing them, so clear them first.
		tail = &a.scratch
		clear(tail.Choices[:cap(tail.Choices)])
		*tail = chunkTail{Choices: tail.Choices[:0]}
		err = decodeChunk(data, tail)
	} else {
		var h chunkHead
		if err = decodeChunk(data, &h); err == nil {
			a.addHead(&h)
		}
		tail = &h.chunkTail
	}
	if err != nil {
		a.err = err
		return a.err
	}
	if tail.Error != nil {
		a.err = fmt.Errorf("%w: %s", ErrErrorEvent, errorMessage(json.RawMessage(tail.Error)))
		return a.err
	}
	a.addTail(tail)
	return nil
}

// decodeChunk decodes one chunk into v, refusing members v has no place
// for (ErrUnassembled) unless they are null: a null member carries
// nothing to rebuild, and some servers send every optional member as
// null (vLLM's stop_reason).
func decodeChunk(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return errors.New("upstream: assemble: data after the chunk's object")
		}
		return nil
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		if !onlyNullUnknown(data, v) {
			return fmt.Errorf("%w: %s", ErrUnassembled, name)
		}
		if err = json.Unmarshal(data, v); err == nil {
			return nil
		}
	}
	return fmt.Errorf("upstream: assemble: %w", err)
}

// onlyNullUnknown reports whether every member of the chunk that v does
// not decode is null, by decoding data again with those members' values
// checked: the rare path, taken only for a chunk with an unknown member.
func onlyNullUnknown(data []byte, v any) bool {
	return nullsOnly(data, reflect.TypeOf(v).Elem())
}

// nullsOnly walks the JSON object raw against struct type t: every key
// t has no field for must be null, recursively for objects and arrays of
// objects its fields hold.
func nullsOnly(raw []byte, t reflect.Type) bool {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	raw = bytes.TrimSpace(raw)
	if t.Kind() != reflect.Struct || len(raw) == 0 {
		return true
	}
	switch raw[0] {
	case '[':
		var elems []json.RawMessage
		if json.Unmarshal(raw, &elems) != nil {
			return false
		}
		for _, e := range elems {
			if !nullsOnly(e, t) {
				return false
			}
		}
		return true
	case '{':
	default:
		return true
	}
	var members map[string]json.RawMessage
	if json.Unmarshal(raw, &members) != nil {
		return false
	}
	fields := jsonFields(t)
	for k, v := range members {
		ft, ok := fields[k]
		switch {
		case !ok && string(bytes.TrimSpace(v)) != "null":
			return false
		case ok && !nullsOnly(v, ft):
			return false
		}
	}
	return true
}

// jsonFields maps the JSON names of struct type t's fields, embedded
// structs' included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && name == "" {
			for k, v := range jsonFields(f.Type) {
				if _, ok := out[k]; !ok {
					out[k] = v
				}
			}
			continue
		}
		if name != "" && name != "-" {
			out[name] = f.Type
		}
	}
	return out
}

// addHead takes the first non-empty values: some upstreams (Azure) open
// with a chunk that has an empty id and model and created 0.
func (a *Assembler) addHead(h *chunkHead) {
	if a.id == "" {
		a.id = h.ID
	}
	if a.model == "" {
		a.model = h.Model
	}
	if (a.created == nil || string(a.created) == "0") && !isNull(h.Created) {
		a.created = h.Created
	}
	if a.fingerprint == nil {
		a.fingerprint = json.RawMessage(h.SystemFingerprint)
	}
	if a.serviceTier == nil {
		a.serviceTier = json.RawMessage(h.ServiceTier)
	}
	// A chunk with choices carries the real head (OpenAI repeats it in
	// every chunk); from here on it is not decoded again.
	a.haveHead = a.id != "" && a.model != "" && a.created != nil && len(h.Choices) > 0
}

func (a *Assembler) addTail(c *chunkTail) {
	if c.Usage != nil {
		a.usage = json.RawMessage(c.Usage) // the last one wins; OpenAI sends exactly one
	}
	for i := range c.Choices {
		cc := &c.Choices[i]
		st := a.choice(cc.Index)
		if a.chat {
			st.addDelta(&cc.Delta)
		} else {
			st.content.WriteString(cc.Text)
		}
		if lp := cc.Logprobs; lp != nil {
			st.lpSeen = true
			if a.chat {
				st.lpContent, st.lpContentSeen = appendElems(st.lpContent, lp.Content, st.lpContentSeen)
				st.lpRefusal, st.lpRefusalSeen = appendElems(st.lpRefusal, lp.Refusal, st.lpRefusalSeen)
			} else {
				st.lpTokens, _ = appendElems(st.lpTokens, lp.Tokens, false)
				st.lpTokenLogprobs, _ = appendElems(st.lpTokenLogprobs, lp.TokenLogprobs, false)
				st.lpTop, _ = appendElems(st.lpTop, lp.TopLogprobs, false)
				st.lpOffset, _ = appendElems(st.lpOffset, lp.TextOffset, false)
			}
		}
		if cc.FinishReason != "" {
			st.finish = cc.FinishReason
		}
	}
}

// choice returns the state for index, creating it. A linear scan: n is
// almost always 1 and rarely above a handful.
func (a *Assembler) choice(index int) *choiceState {
	for _, st := range a.choices {
		if st.index == index {
			return st
		}
	}
	st := &choiceState{index: index}
	a.choices = append(a.choices, st)
	return st
}

func (st *choiceState) addDelta(d *chunkDelta) {
	if d.Role != "" && st.role == "" {
		st.role = d.Role
	}
	st.content.WriteString(d.Content)
	st.reasoning.WriteString(d.ReasoningContent)
	st.refusal.WriteString(d.Refusal)
	st.annots, _ = appendElems(st.annots, d.Annotations, false)
	for i := range d.ToolCalls {
		st.addToolCall(&d.ToolCalls[i])
	}
	if fc := d.FunctionCall; fc != nil {
		if st.fn == nil {
			st.fn = &toolState{}
		}
		st.fn.name.WriteString(fc.Name)
		st.fn.args.WriteString(fc.Arguments)
	}
}

// addToolCall merges a tool-call delta by its index: the first delta for an
// index carries id, type and name, later ones argument fragments. A delta
// without an index (seen from some OpenAI-compatible servers) starts a new
// call when it has an id and continues the last one otherwise.
func (st *choiceState) addToolCall(tc *toolCall) {
	var t *toolState
	switch {
	case tc.Index != nil:
		for _, x := range st.tools {
			if x.index == *tc.Index {
				t = x
				break
			}
		}
		if t == nil {
			t = &toolState{index: *tc.Index}
			st.tools = append(st.tools, t)
		}
	case tc.ID == "" && len(st.tools) > 0:
		t = st.tools[len(st.tools)-1]
	default:
		next := 0
		for _, x := range st.tools {
			next = max(next, x.index+1)
		}
		t = &toolState{index: next}
		st.tools = append(st.tools, t)
	}
	// Some servers repeat id and type on every delta; the first one wins.
	if t.id == "" {
		t.id = tc.ID
	}
	if t.typ == "" {
		t.typ = tc.Type
	}
	t.name.WriteString(tc.Function.Name)
	t.args.WriteString(tc.Function.Arguments)
}

// Complete reports whether the stream ended cleanly: [DONE] seen, no Add
// failed, at least one choice, and every choice has a finish_reason. Only a
// complete stream may be stored.
func (a *Assembler) Complete() bool {
	if a.err != nil || !a.done || len(a.choices) == 0 {
		return false
	}
	for _, st := range a.choices {
		if st.finish == "" {
			return false
		}
	}
	return true
}

// Usage returns the token counts from the stream's usage chunk; ok is false
// when the stream carried none (the request lacked
// stream_options.include_usage) or the usage could not be read (a figure
// wire.Count refuses).
func (a *Assembler) Usage() (prompt, completion int, ok bool) {
	if a.usage == nil {
		return 0, 0, false
	}
	var u struct {
		PromptTokens     wire.Count `json:"prompt_tokens"`
		CompletionTokens wire.Count `json:"completion_tokens"`
	}
	if err := json.Unmarshal(a.usage, &u); err != nil {
		return 0, 0, false
	}
	return int(u.PromptTokens), int(u.CompletionTokens), true
}

// Body returns the assembled non-streaming JSON body, with OpenAI's field
// order: id, object, created, model, choices (by index), usage (omitted
// when the stream had none), service_tier (when present),
// system_fingerprint. It returns ErrIncompleteStream unless Complete.
func (a *Assembler) Body() ([]byte, error) {
	if !a.Complete() {
		if a.err != nil {
			return nil, fmt.Errorf("%w: %w", ErrIncompleteStream, a.err)
		}
		return nil, ErrIncompleteStream
	}
	slices.SortFunc(a.choices, func(x, y *choiceState) int { return cmp.Compare(x.index, y.index) })

	size := 256 + len(a.usage)
	for _, st := range a.choices {
		size += 128 + st.content.Len() + st.reasoning.Len() + st.refusal.Len() + len(st.annots) +
			len(st.lpContent) + len(st.lpRefusal) + len(st.lpTokens) + len(st.lpTokenLogprobs) + len(st.lpTop) + len(st.lpOffset)
		for _, t := range st.tools {
			size += 64 + len(t.id) + t.name.Len() + t.args.Len()
		}
	}
	b := make([]byte, 0, size+size/8) // slack for escapes

	b = append(b, `{"id":`...)
	b = jsonstr.Append(b, a.id)
	if a.chat {
		b = append(b, `,"object":"chat.completion","created":`...)
	} else {
		b = append(b, `,"object":"text_completion","created":`...)
	}
	b = appendRawOr(b, a.created, "0")
	b = append(b, `,"model":`...)
	b = jsonstr.Append(b, a.model)
	b = append(b, `,"choices":[`...)
	for i, st := range a.choices {
		if i > 0 {
			b = append(b, ',')
		}
		if a.chat {
			b = st.appendChat(b)
		} else {
			b = st.appendText(b)
		}
	}
	b = append(b, ']')
	if a.usage != nil {
		b = append(b, `,"usage":`...)
		b = append(b, a.usage...)
	}
	if a.serviceTier != nil {
		b = append(b, `,"service_tier":`...)
		b = append(b, a.serviceTier...)
	}
	if a.chat || a.fingerprint != nil {
		b = append(b, `,"system_fingerprint":`...)
		b = appendRawOr(b, a.fingerprint, "null")
	}
	return append(b, '}'), nil
}

func (st *choiceState) appendChat(b []byte) []byte {
	b = append(b, `{"index":`...)
	b = strconv.AppendInt(b, int64(st.index), 10)
	b = append(b, `,"message":{"role":`...)
	role := st.role
	if role == "" {
		role = "assistant"
	}
	b = jsonstr.Append(b, role)
	b = append(b, `,"content":`...)
	// OpenAI's content is null, not "", when the answer is only tool calls
	// or a refusal.
	if st.content.Len() == 0 && (len(st.tools) > 0 || st.fn != nil || st.refusal.Len() > 0) {
		b = append(b, "null"...)
	} else {
		b = jsonstr.Append(b, st.content.String())
	}
	if st.reasoning.Len() > 0 {
		b = append(b, `,"reasoning_content":`...)
		b = jsonstr.Append(b, st.reasoning.String())
	}
	b = append(b, `,"refusal":`...)
	if st.refusal.Len() > 0 {
		b = jsonstr.Append(b, st.refusal.String())
	} else {
		b = append(b, "null"...)
	}
	if len(st.annots) > 0 {
		b = append(b, `,"annotations":[`...)
		b = append(b, st.annots...)
		b = append(b, ']')
	}
	if len(st.tools) > 0 {
		slices.SortStableFunc(st.tools, func(x, y *toolState) int { return cmp.Compare(x.index, y.index) })
		b = append(b, `,"tool_calls":[`...)
		for i, t := range st.tools {
			if i > 0 {
				b = append(b, ',')
			}
			typ := t.typ
			if typ == "" {
				typ = "function"
			}
			b = append(b, `{"id":`...)
			b = jsonstr.Append(b, t.id)
			b = append(b, `,"type":`...)
			b = jsonstr.Append(b, typ)
			b = append(b, `,"function":`...)
			b = appendFunction(b, t)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if st.fn != nil {
		b = append(b, `,"function_call":`...)
		b = appendFunction(b, st.fn)
	}
	b = append(b, '}')
	return st.appendTail(b, true)
}

func (st *choiceState) appendText(b []byte) []byte {
	b = append(b, `{"text":`...)
	b = jsonstr.Append(b, st.content.String())
	b = append(b, `,"index":`...)
	b = strconv.AppendInt(b, int64(st.index), 10)
	return st.appendTail(b, false)
}

// appendTail ends a choice: its logprobs, in the chat or the legacy
// completions shape, and its finish_reason.
func (st *choiceState) appendTail(b []byte, chat bool) []byte {
	b = append(b, `,"logprobs":`...)
	switch {
	case !st.lpSeen:
		b = append(b, "null"...)
	case chat:
		b = append(b, `{"content":`...)
		b = appendArrayOrNull(b, st.lpContent, st.lpContentSeen)
		b = append(b, `,"refusal":`...)
		b = appendArrayOrNull(b, st.lpRefusal, st.lpRefusalSeen)
		b = append(b, '}')
	default:
		b = append(b, `{"tokens":`...)
		b = appendArrayOrNull(b, st.lpTokens, true)
		b = append(b, `,"token_logprobs":`...)
		b = appendArrayOrNull(b, st.lpTokenLogprobs, true)
		b = append(b, `,"top_logprobs":`...)
		b = appendArrayOrNull(b, st.lpTop, true)
		b = append(b, `,"text_offset":`...)
		b = appendArrayOrNull(b, st.lpOffset, true)
		b = append(b, '}')
	}
	b = append(b, `,"finish_reason":`...)
	b = jsonstr.Append(b, st.finish)
	return append(b, '}')
}

func appendFunction(b []byte, t *toolState) []byte {
	b = append(b, `{"name":`...)
	b = jsonstr.Append(b, t.name.String())
	b = append(b, `,"arguments":`...)
	b = jsonstr.Append(b, t.args.String())
	return append(b, '}')
}

// isNull reports whether raw is absent or JSON null.
func isNull(raw json.RawMessage) bool {
	return len(raw) == 0 || string(raw) == "null"
}

func appendRawOr(b []byte, raw json.RawMessage, def string) []byte {
	if isNull(raw) {
		return append(b, def...)
	}
	return append(b, raw...)
}

// appendElems appends the elements of the JSON array raw to dst, a
// comma-joined element list, and reports whether an array was seen (seen
// is passed through when raw is not an array). raw comes from the JSON
// decoder, so it is valid JSON; anything but an array is ignored.
func appendElems(dst []byte, raw json.RawMessage, seen bool) ([]byte, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) < 2 || raw[0] != '[' {
		return dst, seen
	}
	inner := bytes.TrimSpace(raw[1 : len(raw)-1])
	if len(inner) == 0 {
		return dst, true
	}
	if len(dst) > 0 {
		dst = append(dst, ',')
	}
	return append(dst, inner...), true
}

func appendArrayOrNull(b, elems []byte, seen bool) []byte {
	if !seen {
		return append(b, "null"...)
	}
	b = append(b, '[')
	b = append(b, elems...)
	return append(b, ']')
}

// errorMessage extracts error.message from an error event, for the error
// text; the event itself is relayed to the client unchanged.
func errorMessage(raw json.RawMessage) string {
	var e struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &e) != nil || e.Message == "" {
		return "no message"
	}
	return e.Message
}
