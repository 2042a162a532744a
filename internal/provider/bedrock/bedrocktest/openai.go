package bedrocktest

import (
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
)

// openAI answers Bedrock's OpenAI-compatible chat completions
// (/openai/v1/chat/completions): the body's model is a Bedrock model id,
// the answer is OpenAI's, streamed as OpenAI's SSE when "stream" is true.
func (s *Server) openAI(w http.ResponseWriter, _ *http.Request, c Call) {
	doc := gjson.ParseBytes(c.Body)
	c.Model = doc.Get("model").String()
	c.Stream = doc.Get("stream").Bool()
	s.mu.Lock()
	s.calls[len(s.calls)-1] = c // what the path could not say
	s.mu.Unlock()
	switch {
	case !gjson.ValidBytes(c.Body) || !doc.IsObject():
		writeError(w, http.StatusBadRequest, "ValidationException", "Malformed input request, please reformat your input and try again.", "")
		return
	case c.Model == "" || (len(s.o.Models) > 0 && !slices.Contains(s.o.Models, c.Model)):
		writeError(w, http.StatusBadRequest, "ValidationException", "The provided model identifier is invalid.", "")
		return
	case !doc.Get("messages").IsArray():
		writeError(w, http.StatusBadRequest, "ValidationException", "messages: field required", "")
		return
	}
	rep := s.reply(c)
	if rep.Status >= 400 {
		writeError(w, rep.Status, rep.Error, rep.Message, rep.RetryAfter)
		return
	}
	prompt := ""
	if msgs := doc.Get("messages").Array(); len(msgs) > 0 {
		prompt = msgs[len(msgs)-1].Get("content").String()
	}
	text := rep.Text
	if text == "" {
		text = "bedrock reply to: " + prompt
	}
	id := "chatcmpl-bdrk-" + strconv.FormatInt(seq.Add(1), 10)
	usage := map[string]any{"prompt_tokens": 3 + len(strings.Fields(prompt)), "completion_tokens": len(strings.Fields(text)),
		"total_tokens": 3 + len(strings.Fields(prompt)) + len(strings.Fields(text))}
	w.Header().Set("X-Amzn-Requestid", requestID())
	if !c.Stream {
		w.Header().Set("Content-Type", "application/json")
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion", "created": 1767225600, "model": c.Model,
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": text}, "finish_reason": "stop"}},
			"usage":   usage})
		_, _ = w.Write(b)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	chunk := func(delta map[string]any, finish any) {
		b, _ := json.Marshal(map[string]any{"id": id, "object": "chat.completion.chunk", "created": 1767225600, "model": c.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		_, _ = w.Write([]byte("data: " + string(b) + "\n\n"))
		if fl != nil {
			fl.Flush()
		}
	}
	chunk(map[string]any{"role": "assistant", "content": ""}, nil)
	for _, wd := range strings.SplitAfter(text, " ") {
		chunk(map[string]any{"content": wd}, nil)
	}
	chunk(map[string]any{}, "stop")
	_, _ = w.Write([]byte("data: [DONE]\n\n"))
}
