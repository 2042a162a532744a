package mockllm

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// Anthropic's Messages API (POST /v1/messages and /v1/messages/count_tokens),
// with Anthropic's error shape: {"type":"error","error":{"type":...,"message":...}}.

type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []message       `json:"messages"`
	Tools     json.RawMessage `json:"tools"`
	Stream    bool            `json:"stream"`
	Mock      overrides       `json:"mock"`
	// OutputConfig.Format is structured output; OutputFormat its form
	// under the structured-outputs beta.
	OutputConfig struct {
		Format json.RawMessage `json:"format"`
	} `json:"output_config"`
	OutputFormat json.RawMessage `json:"output_format"`
}

type messageObject struct {
	ID           string        `json:"id"`
	Type         string        `json:"type"`
	Role         string        `json:"role"`
	Model        string        `json:"model"`
	Content      []any         `json:"content"` // messageBlock or toolUseBlock
	StopReason   *string       `json:"stop_reason"`
	StopSequence *string       `json:"stop_sequence"`
	Usage        messagesUsage `json:"usage"`
}

type messageBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string          `json:"type"` // tool_use
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type messagesUsage struct {
	InputTokens              int `json:"input_tokens"`
	OutputTokens             int `json:"output_tokens"`
	CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int `json:"cache_read_input_tokens"`
}

// anthropicErrorTypes are Anthropic's error types by status.
var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
	404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error",
	500: "api_error", 529: "overloaded_error",
}

// writeAnthropicError writes Anthropic's error shape and counts it.
func (s *Server) writeAnthropicError(w http.ResponseWriter, status int, message string) {
	s.stats.errors.Add(1)
	typ, ok := anthropicErrorTypes[status]
	if !ok {
		typ = "api_error"
		if status < 500 {
			typ = "invalid_request_error"
		}
	}
	b := mustMarshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": message}})
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Request-Id", "req_mock")
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// serveMessages answers POST /v1/messages and /v1/messages/count_tokens.
// It reports whether the client went away before the answer was complete.
func (s *Server) serveMessages(w http.ResponseWriter, r *http.Request, countOnly bool) (gone bool) {
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes)); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			s.writeAnthropicError(w, http.StatusRequestEntityTooLarge, msgTooLarge)
			return false
		}
		return r.Context().Err() != nil
	}
	body := buf.Bytes()
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeAnthropicError(w, http.StatusBadRequest, "The request body is not valid JSON: "+err.Error())
		return false
	}
	if req.Model == "" {
		s.writeAnthropicError(w, http.StatusBadRequest, "model: Field required")
		return false
	}
	s.stats.model(req.Model)
	if !countOnly && req.MaxTokens == nil {
		s.writeAnthropicError(w, http.StatusBadRequest, "max_tokens: Field required")
		return false
	}
	if len(req.Messages) == 0 {
		s.writeAnthropicError(w, http.StatusBadRequest, "messages: at least one message is required")
		return false
	}
	words, last := 0, ""
	sys, err := systemText(req.System)
	if err != nil {
		s.writeAnthropicError(w, http.StatusBadRequest, "system: "+err.Error())
		return false
	}
	words += wordCount(sys)
	for _, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			s.writeAnthropicError(w, http.StatusBadRequest, "messages: "+err.Error())
			return false
		}
		words += wordCount(text)
		if m.Role == "user" {
			last = text
		}
	}
	if countOnly {
		s.writeJSON(w, mustMarshal(map[string]int{"input_tokens": max(words, 1)}), false)
		return false
	}

	inner := request{Model: req.Model, Mock: req.Mock}
	pl, err := s.plan(&inner)
	if err != nil {
		var re *requestError
		errors.As(err, &re)
		s.writeAnthropicError(w, http.StatusBadRequest, re.message)
		return false
	}
	if req.Model == "mock-529" {
		pl.status = 529
	}
	if pl.hold(w, r, req.Stream) {
		return true
	}
	if pl.status != 0 {
		msg := "Injected error " + strconv.Itoa(pl.status) + " for model " + req.Model + "."
		if pl.status == http.StatusNotFound {
			msg = "model: " + req.Model // Anthropic's wording for an unknown model
		}
		s.writeAnthropicError(w, pl.status, msg)
		return false
	}
	tool := wantsTool(req.Model)
	if result, ok := messagesToolResult(req.Messages); tool && ok {
		last, tool = result, false // the call has its result: text
	}
	reply := replyPrefix + last
	format := req.OutputConfig.Format
	if len(format) == 0 {
		format = req.OutputFormat
	}
	if r, ok := structuredReply(format, last); ok {
		reply = r
	}
	if req.Mock.Reply != nil {
		reply = *req.Mock.Reply
	}
	hash := bodyHash(body)
	stop := "end_turn"
	var block any = messageBlock{Type: "text", Text: reply}
	if tool {
		tc := newToolCall(hash, last, req.Tools)
		stop, reply = "tool_use", tc.args
		block = toolUseBlock{Type: "tool_use", ID: "toolu_" + tc.id, Name: tc.name, Input: json.RawMessage(tc.args)}
	}
	msg := messageObject{
		ID: "msg_" + hash, Type: "message", Role: "assistant", Model: req.Model,
		Content:    []any{block},
		StopReason: &stop,
		Usage:      messagesUsage{InputTokens: max(words, 1), OutputTokens: wordCount(reply)},
	}
	if !req.Stream {
		s.writeJSON(w, mustMarshal(msg), pl.cutAfter >= 0)
		return false
	}
	return s.streamMessage(w, r, &msg, reply, &pl)
}

// systemText reads "system": a string or an array of text blocks.
func systemText(raw json.RawMessage) (string, error) {
	return contentText(raw)
}

// streamMessage writes a Messages event stream: message_start,
// content_block_start, a ping, one content_block_delta per piece of text
// (text_delta, or input_json_delta of a tool_use block's input),
// content_block_stop, message_delta with the stop reason and the output
// tokens, message_stop. A cut aborts it before message_stop.
func (s *Server) streamMessage(w http.ResponseWriter, r *http.Request, msg *messageObject, text string, pl *plan) (gone bool) {
	ctx, ew := s.startStream(w, r)
	defer ew.stop()
	send := func(typ string, ev map[string]any) bool { return ew.typed(ctx, typ, ev) }
	start := *msg
	start.Content, start.StopReason = []any{}, nil
	start.Usage.OutputTokens = 1
	var open any = messageBlock{Type: "text", Text: ""}
	delta := func(piece string) map[string]string { return map[string]string{"type": "text_delta", "text": piece} }
	if tu, ok := msg.Content[0].(toolUseBlock); ok {
		tu.Input = json.RawMessage(`{}`)
		open = tu
		delta = func(piece string) map[string]string {
			return map[string]string{"type": "input_json_delta", "partial_json": piece}
		}
	}
	if !send("message_start", map[string]any{"message": start}) ||
		!send("content_block_start", map[string]any{"index": 0, "content_block": open}) ||
		!send("ping", map[string]any{}) {
		return true
	}
	pieces := split(text, pl.chunks)
	if s.pace(ctx, w, ew, pl, len(pieces), func(k int) bool {
		return send("content_block_delta", map[string]any{"index": 0, "delta": delta(pieces[k])})
	}) {
		return true
	}
	if !send("content_block_stop", map[string]any{"index": 0}) ||
		!send("message_delta", map[string]any{"delta": map[string]any{"stop_reason": *msg.StopReason, "stop_sequence": nil},
			"usage": map[string]int{"output_tokens": msg.Usage.OutputTokens}}) {
		return true
	}
	return !send("message_stop", map[string]any{})
}

// isMessagesPath reports whether p is one of the Messages API's paths.
func isMessagesPath(p string) (ok, countOnly bool) {
	switch strings.TrimSuffix(p, "/") {
	case "/v1/messages":
		return true, false
	case "/v1/messages/count_tokens":
		return true, true
	}
	return false, false
}
