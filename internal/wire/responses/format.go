package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/sse"
)

// Path is the endpoint below /v1.
const Path = "/responses"

// Policy is the Responses API's keying policy: stream, stream_options,
// user, metadata, client_metadata (Codex's session, thread and turn ids
// and start time) and user's successors prompt_cache_key and
// safety_identifier do not change the answer; store and
// previous_response_id do.
//
// With store false, so are the ids of the input items in unstoredItems:
// such an item carries its whole content, the upstream reads it from the
// request and keeps nothing under its id, and Codex mints a fresh id for
// the same item on every run. Every other item keeps its id: an
// item_reference (and an item with no type, which the API reads as one)
// is nothing but the id, a reasoning item's id may name a stored item the
// upstream reads back, and an item type Corral does not know may do the
// same. With store true (the default) every id stays: it names the item
// the upstream stores, which the tenant reads back as the response's
// input items.
var Policy = keying.NewPolicy(map[string]keying.Drop{
	"stream":            {Always: keying.Bool | keying.Null},
	"stream_options":    {Always: keying.Null, WhenStreaming: keying.Object},
	"metadata":          {Always: keying.Object | keying.Null},
	"client_metadata":   {Always: keying.Object | keying.Null},
	"user":              {Always: keying.String | keying.Null},
	"prompt_cache_key":  {Always: keying.String | keying.Null},
	"safety_identifier": {Always: keying.String | keying.Null},
}).WithUnstoredItemIDs("input", unstoredItems...)

// unstoredItems are the input item types whose id Policy drops when store
// is false: the items that carry their whole content.
var unstoredItems = []string{"message", "function_call", "function_call_output", "custom_tool_call", "custom_tool_call_output"}

// DefaultMaxOutputTokens is the completion size the estimate assumes when
// a request sets no max_output_tokens.
const DefaultMaxOutputTokens = 256

// Format is the Responses API's wire format.
type Format struct{}

var _ wire.Format = Format{}

// facts is what Parse reads beside the key. encoding/json matches keys in
// any case, which errs toward bypassing: a body an upstream might read as
// background or with hosted tools is never cached.
type facts struct {
	MaxOutputTokens *float64        `json:"max_output_tokens"`
	Background      *bool           `json:"background"`
	Conversation    json.RawMessage `json:"conversation"`
	Tools           []tool          `json:"tools"`
}

// tool is a tools entry as far as bypass cares: its type, and for a
// namespace the tools it groups.
type tool struct {
	Type  string `json:"type"`
	Tools []tool `json:"tools"`
}

// Parse implements wire.Format.
func (Format) Parse(tenant, endpoint string, body []byte) (wire.Facts, error) {
	r, err := keying.ParseWith(Policy, tenant, endpoint, body)
	if err != nil {
		return wire.Facts{}, err
	}
	var fx facts
	if err := json.Unmarshal(body, &fx); err != nil {
		// The keying parser accepted it; a field of an unexpected type
		// (tools not an array) is the upstream's to refuse. Cache nothing.
		return wire.Facts{Hash: r.Hash, Model: r.Model, Stream: r.Stream, Estimate: estimate(len(body), 0), Bypass: "unreadable fields"}, nil
	}
	maxOut := 0
	if fx.MaxOutputTokens != nil && *fx.MaxOutputTokens > 0 && *fx.MaxOutputTokens < math.MaxInt32 {
		maxOut = int(*fx.MaxOutputTokens)
	}
	return wire.Facts{
		Hash:     r.Hash,
		Model:    r.Model,
		Stream:   r.Stream,
		Estimate: estimate(len(body), maxOut),
		Bypass:   bypass(&fx),
	}, nil
}

// bypass names why a request is never cached or coalesced, or "".
func bypass(fx *facts) string {
	switch {
	case fx.Background != nil && *fx.Background:
		return "background"
	case len(fx.Conversation) > 0 && string(fx.Conversation) != "null":
		return "conversation"
	}
	return hostedTool(fx.Tools)
}

// hostedTool names the first tool of tools the upstream runs itself (web
// or file search, code interpreter, an MCP server, ...), whose answer
// depends on more than the prompt, or "". The client runs function and
// custom tools, and a namespace (Codex's group of function tools under
// one name) is only a name over tools judged the same way.
func hostedTool(tools []tool) string {
	for _, t := range tools {
		switch t.Type {
		case "function", "custom":
		case "namespace":
			if h := hostedTool(t.Tools); h != "" {
				return h
			}
		case "":
			return "tool without a type"
		default:
			return "hosted tool " + t.Type
		}
	}
	return ""
}

// estimate is the tokens/min charge before the call: the whole body at 4
// bytes a token, plus max_output_tokens or DefaultMaxOutputTokens.
func estimate(bodyBytes, maxOut int) int {
	if maxOut <= 0 {
		maxOut = DefaultMaxOutputTokens
	}
	return (bodyBytes+3)/4 + maxOut
}

// Prepare implements wire.Format: the body goes as it is (the Responses
// stream always carries usage in response.completed).
func (Format) Prepare(_ wire.Facts, body []byte) ([]byte, bool) { return body, false }

// IsEnd implements wire.Format: response.completed, response.failed,
// response.incomplete and error end a Responses stream.
func (Format) IsEnd(ev []byte) bool {
	switch sse.Type(ev) {
	case "response.completed", "response.failed", "response.incomplete", "error":
		return true
	}
	return false
}

// NewAssembler implements wire.Format.
func (Format) NewAssembler(string) wire.Assembler { return &Assembler{} }

// Usage implements wire.Format: input_tokens (input_tokens_details.cached_tokens
// included) and output_tokens of a response, and its model. A usage object
// without both, or with a figure wire.Count refuses or Usage.Checked
// disbelieves, is unread.
func (Format) Usage(body []byte) wire.Usage {
	var v struct {
		Model string `json:"model"`
		Usage *struct {
			InputTokens        *wire.Count `json:"input_tokens"`
			OutputTokens       *wire.Count `json:"output_tokens"`
			InputTokensDetails *struct {
				CachedTokens wire.Count `json:"cached_tokens"`
			} `json:"input_tokens_details"`
		} `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil || v.Usage.InputTokens == nil || v.Usage.OutputTokens == nil {
		return wire.Usage{}
	}
	u := wire.Usage{Prompt: int(*v.Usage.InputTokens), Completion: int(*v.Usage.OutputTokens), Model: v.Model, Known: true}
	if d := v.Usage.InputTokensDetails; d != nil {
		u.Cached = int(d.CachedTokens)
	}
	return u.Checked()
}

// Answer implements wire.Format: a response object (object "response"
// when present) with an id and an output array, and a null error (a
// failed response carries its error there).
func (Format) Answer(_ string, body []byte) bool {
	var v struct {
		Object *string         `json:"object"`
		ID     string          `json:"id"`
		Output json.RawMessage `json:"output"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &v) != nil || (len(v.Error) > 0 && string(v.Error) != "null") {
		return false
	}
	return v.ID != "" && len(v.Output) > 0 && v.Output[0] == '[' && (v.Object == nil || *v.Object == "response")
}

// Replay implements wire.Format with Replay.
func (Format) Replay(_ string, body []byte, _ wire.Facts) ([][]byte, error) { return Replay(body) }

// Hidden implements wire.Format: followers see every event.
func (Format) Hidden(wire.Facts) func([]byte) bool { return nil }

// ErrorBody implements wire.Format: the Responses API shares OpenAI's
// error object.
func (Format) ErrorBody(e wire.Error) []byte { return openai.Format{}.ErrorBody(e) }

// ErrorEvent implements wire.Format: a stream Corral must cut ends with
// "event: error" and the API's error event,
// {"type":"error","code":...,"message":...,"param":...,"sequence_number":next}:
// every field the SDKs' ResponseErrorEvent requires, numbered after the
// events the client already has.
func (Format) ErrorEvent(e wire.Error, next int64) []byte {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(struct {
		Type           string `json:"type"`
		Code           string `json:"code"`
		Message        string `json:"message"`
		Param          any    `json:"param"`
		SequenceNumber int64  `json:"sequence_number"`
	}{"error", e.Code, e.Message, param, next})
	return sse.Typed("error", b)
}

// sequenceKey is the member every Responses stream event carries.
var sequenceKey = []byte(`"sequence_number"`)

// Sequence implements wire.Format: the event's sequence_number. It is
// found without decoding the event (which runs for every event relayed):
// the first "sequence_number" member, the top-level one in every event of
// the API (no nested object has one, and inside a JSON string the quotes
// would be escaped).
func (Format) Sequence(ev []byte) (int64, bool) {
	i := bytes.Index(ev, sequenceKey)
	if i < 0 {
		return 0, false
	}
	rest := bytes.TrimLeft(ev[i+len(sequenceKey):], " \t")
	rest, ok := bytes.CutPrefix(rest, []byte{':'})
	if !ok {
		return 0, false
	}
	rest = bytes.TrimLeft(rest, " \t")
	var n int64
	digits := 0
	for ; digits < len(rest) && rest[digits] >= '0' && rest[digits] <= '9'; digits++ {
		if n > (math.MaxInt64-9)/10 {
			return 0, false // beyond any stream's length
		}
		n = n*10 + int64(rest[digits]-'0')
	}
	return n, digits > 0
}

// ErrIncomplete is Finish's answer for a stream that did not end with
// response.completed.
var ErrIncomplete = errors.New("responses: stream did not end with response.completed")

// Assembler keeps the response of a stream's response.completed event.
// Every other event is relayed and otherwise ignored (deltas rebuild what
// response.completed already holds whole), so unknown event types cost
// nothing and cannot break a stream.
type Assembler struct {
	body   []byte
	failed bool
	ended  bool
}

// Add implements wire.Assembler.
func (a *Assembler) Add(ev []byte) bool {
	if a.ended {
		return true
	}
	typ := sse.Type(ev)
	switch typ {
	case "response.completed":
		var v struct {
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(sse.Data(ev), &v) != nil || len(v.Response) == 0 || v.Response[0] != '{' {
			a.failed = true
		} else {
			a.body = append([]byte(nil), v.Response...)
		}
		a.ended = true
	case "response.failed", "response.incomplete", "error":
		a.failed, a.ended = true, true
	}
	return a.ended
}

// Finish implements wire.Assembler.
func (a *Assembler) Finish() ([]byte, wire.Usage, error) {
	if a.failed || a.body == nil {
		return nil, wire.Usage{}, ErrIncomplete
	}
	return a.body, Format{}.Usage(a.body), nil
}
