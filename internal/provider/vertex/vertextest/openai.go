package vertextest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// chat answers endpoints/openapi/chat/completions, Vertex's
// OpenAI-compatible Chat Completions: the body's model is a Vertex model
// ("google/gemini-2.0-flash-001": publisher, slash, model), errors are
// Google's.
func (s *Server) chat(w http.ResponseWriter, req Request) {
	body := gjson.ParseBytes(req.Body)
	if !gjson.ValidBytes(req.Body) || !body.IsObject() {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "Invalid JSON payload received.")
		return
	}
	model := body.Get("model").String()
	if publisher, name, ok := strings.Cut(model, "/"); !ok || publisher == "" || name == "" {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", fmt.Sprintf("Invalid model %q: want publisher/model, e.g. google/gemini-2.0-flash-001.", model))
		return
	}
	msgs := body.Get("messages").Array()
	if len(msgs) == 0 {
		googleError(w, http.StatusBadRequest, "INVALID_ARGUMENT", "messages: at least one message is required.")
		return
	}
	text := "Vertex heard: " + msgs[len(msgs)-1].Get("content").String()
	id, created := "chatcmpl-vrtx-"+randomHex(8), time.Now().Unix()
	usage := map[string]int{"prompt_tokens": inputTokens(body), "completion_tokens": len(strings.Fields(text))}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	if !body.Get("stream").Bool() {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": model, "system_fingerprint": "",
			"choices": []map[string]any{{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": text}}},
			"usage": usage,
		})
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any, u any) {
		b, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion.chunk", "created": created, "model": model, "system_fingerprint": "",
			"choices": []map[string]any{{"index": 0, "delta": delta, "finish_reason": finish}}, "usage": u,
		})
		fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	words := strings.SplitAfter(text, " ")
	for i, part := range words {
		d := map[string]any{"content": part}
		if i == 0 {
			d["role"] = "assistant"
		}
		chunk(d, nil, nil)
	}
	chunk(map[string]any{}, "stop", usage)
	fmt.Fprint(w, "data: [DONE]\n\n")
}
