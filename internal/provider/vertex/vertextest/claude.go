package vertextest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tidwall/gjson"
)

// claude answers .../publishers/anthropic/models/{model}:{method}.
func (s *Server) claude(w http.ResponseWriter, req Request, model, method string) {
	model, err := url.PathUnescape(model)
	if err != nil || model == "" {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	body := gjson.ParseBytes(req.Body)
	if !gjson.ValidBytes(req.Body) || !body.IsObject() {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "The request body is not valid JSON.")
		return
	}
	if !body.Get("anthropic_version").Exists() {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: Field required")
		return
	}
	if body.Get("anthropic_version").Type != gjson.String {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "anthropic_version: Input should be a valid string")
		return
	}
	if model == "count-tokens" {
		if method != "rawPredict" {
			googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
			return
		}
		s.countTokens(w, body)
		return
	}
	if msg := messagesProblem(body); msg != "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", msg)
		return
	}
	// Vertex takes the model from the URL; anthropic-sdk-go removes it
	// from the body.
	if body.Get("model").Exists() {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Extra inputs are not permitted")
		return
	}
	stream := body.Get("stream").Bool()
	switch {
	case method == "rawPredict" && !stream:
		s.message(w, model, body)
	case method == "streamRawPredict" && stream:
		s.streamMessage(w, model, body)
	case method == "rawPredict" || method == "streamRawPredict":
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "stream: must be true for streamRawPredict and false or absent for rawPredict")
	default:
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
	}
}

// messagesProblem is what Claude says of a Messages body it refuses, or "".
func messagesProblem(body gjson.Result) string {
	switch {
	case body.Get("max_tokens").Type != gjson.Number:
		return "max_tokens: Field required"
	case !body.Get("messages").IsArray() || len(body.Get("messages").Array()) == 0:
		return "messages: Field required"
	}
	return ""
}

// answeredModel is the model Vertex's answers name for a model version:
// claude-sonnet-4-5@20250929 answers as claude-sonnet-4-5-20250929.
func answeredModel(id string) string { return strings.Replace(id, "@", "-", 1) }

// reply is the fake's text for a Messages body: it names the last user
// text, so distinct prompts get distinct answers.
func reply(body gjson.Result) string {
	msgs := body.Get("messages").Array()
	last := msgs[len(msgs)-1].Get("content")
	text := last.String()
	if last.IsArray() {
		text = ""
		for _, b := range last.Array() {
			text += b.Get("text").String()
		}
	}
	return "Vertex heard: " + text
}

func (s *Server) message(w http.ResponseWriter, model string, body gjson.Result) {
	text := reply(body)
	b, _ := json.Marshal(map[string]any{
		"model": answeredModel(model), "id": "msg_vrtx_" + randomHex(12), "type": "message", "role": "assistant",
		"content":     []map[string]any{{"type": "text", "text": text}},
		"stop_reason": "end_turn", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": inputTokens(body), "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0,
			"output_tokens": len(strings.Fields(text))},
	})
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// streamMessage streams the answer as Vertex does: Anthropic's events,
// each data line padded with spaces before its last brace, a ping after
// message_start, flushed one event at a time.
func (s *Server) streamMessage(w http.ResponseWriter, model string, body gjson.Result) {
	w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	n := 0
	event := func(name, data string) {
		n++
		pad := strings.Repeat(" ", n%7)
		if name != "ping" {
			data = data[:len(data)-1] + pad + "}"
		}
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		if fl != nil {
			fl.Flush()
		}
	}
	id := "msg_vrtx_" + randomHex(12)
	event("message_start", `{"type":"message_start","message":{"model":`+quote(answeredModel(model))+`,"id":"`+id+
		`","type":"message","role":"assistant","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+
		fmt.Sprint(inputTokens(body))+`,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`)
	event("ping", `{"type": "ping"}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	words := strings.SplitAfter(reply(body), " ")
	for _, part := range words {
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+quote(part)+`}}`)
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`+
		fmt.Sprint(len(words))+`}}`)
	event("message_stop", `{"type":"message_stop"}`)
}

// countTokens answers count-tokens:rawPredict, whose body names the model.
func (s *Server) countTokens(w http.ResponseWriter, body gjson.Result) {
	if body.Get("model").Type != gjson.String || body.Get("model").String() == "" {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "model: Field required")
		return
	}
	if !body.Get("messages").IsArray() {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "messages: Field required")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"input_tokens":%d}`, inputTokens(body))
}

// inputTokens is the fake's count: one per word of the messages' JSON.
func inputTokens(body gjson.Result) int {
	return 3 + len(strings.Fields(body.Get("messages").Raw))
}

// anthropicError writes Claude's own error body, as Vertex relays it.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]string{"type": typ, "message": msg},
		"request_id": "req_vrtx_" + randomHex(12)})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
