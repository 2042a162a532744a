package anthropic

import (
	"encoding/json"
	"math"
	"net/http"
	"strings"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// Path is the endpoint below /v1.
const Path = "/messages"

// Policy is the Messages API's keying policy: stream and metadata do not
// change the answer.
var Policy = keying.NewPolicy(map[string]keying.Drop{
	"stream":   {Always: keying.Bool | keying.Null},
	"metadata": {Always: keying.Object | keying.Null},
})

// Format is Anthropic's Messages wire format.
type Format struct{}

var _ wire.Format = Format{}

// Parse implements wire.Format.
func (Format) Parse(tenant, endpoint string, body []byte) (wire.Facts, error) {
	r, err := keying.ParseWith(Policy, tenant, endpoint, body)
	if err != nil {
		return wire.Facts{}, err
	}
	fx := wire.Facts{Hash: r.Hash, Model: r.Model, Stream: r.Stream}
	var v facts
	if err := json.Unmarshal(body, &v); err != nil {
		// The keying parser accepted it; a field of an unexpected type
		// (tools not an array) is the upstream's to refuse. Cache nothing.
		fx.Estimate, fx.Bypass = estimate(len(body), 0), "unreadable fields"
		return fx, nil
	}
	maxTokens := 0
	if v.MaxTokens != nil && *v.MaxTokens > 0 && *v.MaxTokens < math.MaxInt32 {
		maxTokens = int(*v.MaxTokens)
	}
	fx.Estimate, fx.Bypass = estimate(len(body), maxTokens), bypass(&v)
	return fx, nil
}

// estimate is the tokens/min charge before the call: the whole body at 4
// bytes a token, plus max_tokens.
func estimate(bodyBytes, maxTokens int) int { return (bodyBytes+3)/4 + maxTokens }

// facts is what Parse reads beside the key. encoding/json matches keys in
// any case, which errs toward bypassing: a body an upstream might read as
// naming a server tool is never cached.
type facts struct {
	MaxTokens  *float64          `json:"max_tokens"`
	MCPServers []json.RawMessage `json:"mcp_servers"`
	Container  json.RawMessage   `json:"container"`
	Tools      []struct {
		Type string `json:"type"`
	} `json:"tools"`
}

// bypass names why a request is never cached or coalesced, or "": the
// answer depends on more than the prompt when Anthropic runs a tool itself
// (the web today, a container's state, an MCP server's data). Tools the
// client runs leave the answer a function of the prompt, their results
// coming back as tool_result blocks of a later request.
func bypass(fx *facts) string {
	switch {
	case len(fx.MCPServers) > 0:
		return "mcp_servers"
	case len(fx.Container) > 0 && string(fx.Container) != "null":
		return "container"
	}
	for _, t := range fx.Tools {
		if serverTool(t.Type) {
			return "server tool " + t.Type
		}
	}
	return ""
}

// clientTools are the prefixes of the Anthropic-defined tool types the
// client executes (bash_20250124, text_editor_20250728,
// computer_20250124, memory_20250818, ...): Anthropic defines their
// schema, the client runs them.
var clientTools = []string{"bash_", "text_editor_", "computer_", "memory_"}

// serverTool reports whether the upstream runs a tool of type typ itself:
// web_search_*, web_fetch_*, code_execution_*, tool_search_tool_*,
// mcp_toolset, and any type Corral does not know (a new server tool must
// not be cached by default). A custom tool has no type or type "custom".
func serverTool(typ string) bool {
	if typ == "" || typ == "custom" {
		return false
	}
	for _, p := range clientTools {
		if strings.HasPrefix(typ, p) {
			return false
		}
	}
	return true
}

// Prepare implements wire.Format: the body goes as it is.
func (Format) Prepare(_ wire.Facts, body []byte) ([]byte, bool) { return body, false }

// IsEnd implements wire.Format: message_stop and error end a stream.
func (Format) IsEnd(ev []byte) bool {
	t := sse.Type(ev)
	return t == "message_stop" || t == "error"
}

// NewAssembler implements wire.Format.
func (Format) NewAssembler(string) wire.Assembler { return &Assembler{} }

// usage is Anthropic's usage object.
// Its figures are read through wire.Count, so one that cannot be true
// makes the event or answer holding it unreadable.
type usage struct {
	InputTokens              *wire.Count `json:"input_tokens,omitempty"`
	OutputTokens             *wire.Count `json:"output_tokens,omitempty"`
	CacheCreationInputTokens *wire.Count `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *wire.Count `json:"cache_read_input_tokens,omitempty"`
}

func (u *usage) wire() wire.Usage {
	v := func(p *wire.Count) int {
		if p == nil {
			return 0
		}
		return int(*p)
	}
	if u == nil || (u.InputTokens == nil && u.OutputTokens == nil) {
		return wire.Usage{}
	}
	return wire.Usage{
		Prompt:     v(u.InputTokens) + v(u.CacheCreationInputTokens) + v(u.CacheReadInputTokens),
		Completion: v(u.OutputTokens),
		Cached:     v(u.CacheReadInputTokens),
		CacheWrite: v(u.CacheCreationInputTokens),
		Known:      true,
	}.Checked()
}

// Answer implements wire.Format: a message ({"type":"message"} with a
// content array); Anthropic's errors are {"type":"error",...}.
func (Format) Answer(_ string, body []byte) bool {
	var v struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	return json.Unmarshal(body, &v) == nil && v.Type == "message" && len(v.Content) > 0 && v.Content[0] == '['
}

// Usage implements wire.Format: input tokens (cache reads and writes
// included) and output tokens of a message, and its model.
func (Format) Usage(body []byte) wire.Usage {
	var v struct {
		Model string `json:"model"`
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil {
		return wire.Usage{}
	}
	u := v.Usage.wire()
	if u.Known {
		u.Model = v.Model
	}
	return u
}

// Replay implements wire.Format with Replay.
func (Format) Replay(_ string, body []byte, _ wire.Facts) ([][]byte, error) { return Replay(body) }

// Hidden implements wire.Format: followers see every event.
func (Format) Hidden(wire.Facts) func([]byte) bool { return nil }

// ErrorType is Anthropic's error type for a status Corral answers with.
func ErrorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	case 529:
		return "overloaded_error"
	}
	if status < 500 {
		return "invalid_request_error"
	}
	return "api_error"
}

// ErrorBody implements wire.Format: {"type":"error","error":{"type":...,"message":...}},
// the type following the status (an upstream credential problem, a 502,
// is an api_error, never an authentication_error).
func (Format) ErrorBody(e wire.Error) []byte {
	b, _ := json.Marshal(errorEnvelope{Type: "error", Error: errorDetail{Type: ErrorType(e.Status), Message: e.Message}})
	return b
}

type errorEnvelope struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// Sequence implements wire.Format: Messages events carry no sequence
// number.
func (Format) Sequence([]byte) (int64, bool) { return 0, false }

// ErrorEvent implements wire.Format: a cut stream ends with an error event
// of type api_error (timeout_error for a timeout).
func (Format) ErrorEvent(e wire.Error, _ int64) []byte {
	typ := "api_error"
	if e.Status == http.StatusGatewayTimeout {
		typ = "timeout_error"
	}
	b, _ := json.Marshal(errorEnvelope{Type: "error", Error: errorDetail{Type: typ, Message: e.Message}})
	return sse.Typed("error", b)
}
