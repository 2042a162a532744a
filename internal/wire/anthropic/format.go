package anthropic

import (
	"encoding/json"
	"math"
	"net/http"

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
	var v struct {
		MaxTokens *float64 `json:"max_tokens"`
	}
	_ = json.Unmarshal(body, &v)
	maxTokens := 0
	if v.MaxTokens != nil && *v.MaxTokens > 0 && *v.MaxTokens < math.MaxInt32 {
		maxTokens = int(*v.MaxTokens)
	}
	return wire.Facts{Hash: r.Hash, Model: r.Model, Stream: r.Stream, Estimate: (len(body)+3)/4 + maxTokens}, nil
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
type usage struct {
	InputTokens              *int `json:"input_tokens,omitempty"`
	OutputTokens             *int `json:"output_tokens,omitempty"`
	CacheCreationInputTokens *int `json:"cache_creation_input_tokens,omitempty"`
	CacheReadInputTokens     *int `json:"cache_read_input_tokens,omitempty"`
}

func (u *usage) wire() wire.Usage {
	v := func(p *int) int {
		if p == nil {
			return 0
		}
		return *p
	}
	if u == nil || (u.InputTokens == nil && u.OutputTokens == nil) {
		return wire.Usage{}
	}
	return wire.Usage{
		Prompt:     v(u.InputTokens) + v(u.CacheCreationInputTokens) + v(u.CacheReadInputTokens),
		Completion: v(u.OutputTokens),
		Known:      true,
	}
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
// included) and output tokens of a message.
func (Format) Usage(body []byte) wire.Usage {
	var v struct {
		Usage *usage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil {
		return wire.Usage{}
	}
	return v.Usage.wire()
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
