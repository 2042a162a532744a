package bedrocktest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/tidwall/gjson"
)

// claude answers InvokeModel or InvokeModelWithResponseStream for an
// Anthropic model, after Bedrock's checks of the body's envelope.
func (s *Server) claude(w http.ResponseWriter, r *http.Request, c Call) {
	if msg := s.checkClaude(c); msg != "" {
		writeError(w, http.StatusBadRequest, "ValidationException", msg, "")
		return
	}
	rep := s.reply(c)
	if rep.Status >= 400 {
		writeError(w, rep.Status, rep.Error, rep.Message, rep.RetryAfter)
		return
	}
	prompt := lastUserText(c.Body)
	text := rep.Text
	if text == "" {
		text = "bedrock reply to: " + prompt
	}
	in, out := 3+len(strings.Fields(prompt)), len(strings.Fields(text))
	h := w.Header()
	h.Set("X-Amzn-Requestid", requestID())
	if rep.RetryAfter != "" {
		h.Set("Retry-After", rep.RetryAfter)
	}
	id := "msg_bdrk_" + strconv.FormatInt(seq.Add(1), 10)
	if !c.Stream {
		h.Set("Content-Type", "application/json")
		h.Set("X-Amzn-Bedrock-Input-Token-Count", strconv.Itoa(in))
		h.Set("X-Amzn-Bedrock-Output-Token-Count", strconv.Itoa(out))
		h.Set("X-Amzn-Bedrock-Invocation-Latency", "412")
		b, _ := json.Marshal(map[string]any{"id": id, "type": "message", "role": "assistant", "model": s.o.AnswerModel,
			"content": []any{map[string]any{"type": "text", "text": text}}, "stop_reason": "end_turn", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": in, "output_tokens": out}})
		_, _ = w.Write(b)
		return
	}
	h.Set("Content-Type", "application/vnd.amazon.eventstream")
	h.Set("X-Amzn-Bedrock-Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	sent := 0
	send := func(ev []byte) bool {
		if rep.Exception != "" && sent == rep.ExceptionAfter {
			_, _ = w.Write(exceptionFrame(rep.Exception, exceptionText(rep)))
			return false
		}
		if _, err := w.Write(chunkFrame(ev, sent)); err != nil {
			return false
		}
		sent++
		if fl != nil {
			fl.Flush()
		}
		return true
	}
	events := streamEvents(id, s.o.AnswerModel, text, in, out)
	for i, ev := range events {
		if !send(ev) {
			return
		}
		if i == 2 && rep.Hold != nil { // message_start, content_block_start, the first delta
			select {
			case <-rep.Hold:
			case <-r.Context().Done():
				return
			}
		}
	}
	if rep.Exception != "" && sent == rep.ExceptionAfter {
		send(nil)
	}
}

// checkClaude is Bedrock's check of an Anthropic body ("" when it
// passes), with Bedrock's wording: a JSON object with anthropic_version,
// max_tokens and messages, and none of the first-party fields the
// envelope must remove (model, stream). Other keys are not checked: the
// fake would lag Anthropic's additions.
func (s *Server) checkClaude(c Call) string {
	if len(s.o.Models) > 0 && !slices.Contains(s.o.Models, c.Model) {
		return "The provided model identifier is invalid."
	}
	doc := gjson.ParseBytes(c.Body)
	if !gjson.ValidBytes(c.Body) || !doc.IsObject() {
		return "Malformed input request, please reformat your input and try again."
	}
	for _, k := range []string{"anthropic_version", "max_tokens", "messages"} {
		if !doc.Get(k).Exists() {
			return fmt.Sprintf("Malformed input request: #: required key [%s] not found, please reformat your input and try again.", k)
		}
	}
	if doc.Get("anthropic_version").Type != gjson.String {
		return "Malformed input request: #/anthropic_version: expected type: String, please reformat your input and try again."
	}
	for _, k := range []string{"model", "stream"} {
		if doc.Get(k).Exists() {
			return fmt.Sprintf("Malformed input request: #: extraneous key [%s] is not permitted, please reformat your input and try again.", k)
		}
	}
	if b := doc.Get("anthropic_beta"); b.Exists() && !b.IsArray() {
		return "Malformed input request: #/anthropic_beta: expected type: JSONArray, please reformat your input and try again."
	}
	return ""
}

// streamEvents are the Anthropic events of a streamed answer of text,
// one delta per word, ending with Bedrock's invocation metrics in
// message_stop as Bedrock adds them.
func streamEvents(id, model, text string, in, out int) [][]byte {
	m := func(v any) []byte { b, _ := json.Marshal(v); return b }
	evs := [][]byte{
		m(map[string]any{"type": "message_start", "message": map[string]any{"id": id, "type": "message", "role": "assistant",
			"model": model, "content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": in, "output_tokens": 1}}}),
		m(map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}}),
	}
	words := strings.SplitAfter(text, " ")
	for _, wd := range words {
		evs = append(evs, m(map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": wd}}))
	}
	return append(evs,
		m(map[string]any{"type": "content_block_stop", "index": 0}),
		m(map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil},
			"usage": map[string]any{"output_tokens": out}}),
		m(map[string]any{"type": "message_stop", "amazon-bedrock-invocationMetrics": map[string]any{
			"inputTokenCount": in, "outputTokenCount": out, "invocationLatency": 412, "firstByteLatency": 97}}),
	)
}

// lastUserText is the text of the last message's content (a string or
// its first text block).
func lastUserText(body []byte) string {
	msgs := gjson.GetBytes(body, "messages").Array()
	if len(msgs) == 0 {
		return ""
	}
	content := msgs[len(msgs)-1].Get("content")
	if content.Type == gjson.String {
		return content.String()
	}
	for _, b := range content.Array() {
		if b.Get("type").String() == "text" {
			return b.Get("text").String()
		}
	}
	return ""
}

func exceptionText(rep Reply) string {
	if rep.Message != "" {
		return rep.Message
	}
	switch rep.Exception {
	case "throttlingException":
		return "Too many requests, please wait before trying again."
	case "serviceUnavailableException":
		return "Bedrock is unable to process your request."
	case "modelStreamErrorException":
		return "The model stream was interrupted."
	}
	return rep.Exception
}

var seq atomic.Int64

func requestID() string {
	n := seq.Add(1)
	return fmt.Sprintf("%08x-0000-4000-8000-%012x", n, n)
}

func jsonString(s string) []byte { b, _ := json.Marshal(s); return b }
