package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// replyPrefix starts every derived reply; the rest is the prompt text.
const replyPrefix = "mock reply to: "

// completion is a whole answer of chat completions (C = chatChoice) or
// legacy completions (C = textChoice).
type completion[C any] struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
	Choices           []C    `json:"choices"`
	Usage             usage  `json:"usage"`
}

type chatCompletion = completion[chatChoice]

type chatChoice struct {
	Index        int         `json:"index"`
	Message      chatMessage `json:"message"`
	Logprobs     *struct{}   `json:"logprobs"` // always null
	FinishReason string      `json:"finish_reason"`
}

type chatMessage struct {
	Role      string         `json:"role"`
	Content   *string        `json:"content"` // null with tool calls
	Refusal   *string        `json:"refusal"` // always null
	ToolCalls []chatToolCall `json:"tool_calls,omitempty"`
}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// serveChat answers POST /v1/chat/completions. It reports whether the
// client went away before the answer was complete.
func (s *Server) serveChat(w http.ResponseWriter, r *http.Request, req *request, pl *plan, hash string) (gone bool) {
	if len(req.Messages) == 0 {
		s.writeBadRequest(w, "'messages' must be a non-empty array.", "messages")
		return false
	}
	words, last := 0, ""
	for _, m := range req.Messages {
		text, err := contentText(m.Content)
		if err != nil {
			s.writeBadRequest(w, err.Error(), "messages")
			return false
		}
		words += wordCount(text)
		if m.Role == "user" {
			last = text
		}
	}
	id := "chatcmpl-" + hash
	if wantsTool(req.Model) {
		result, ok := chatToolResult(req.Messages)
		if !ok {
			return s.serveChatTool(w, r, req, pl, id, newToolCall(hash, last, req.Tools), words)
		}
		last = result
	}
	reply := replyPrefix + last
	if r, ok := structuredReply(req.ResponseFormat, last); ok {
		reply = r
	}
	if req.Mock.Reply != nil {
		reply = *req.Mock.Reply
	}
	u := newUsage(words, wordCount(reply)*req.N)

	if req.Stream {
		replies := make([]string, req.N)
		for i := range replies {
			replies[i] = reply
		}
		spec := req.streamSpec(id, replies, u)
		spec.chat = true
		return s.stream(w, r, spec, pl)
	}

	c := newChatCompletion(id, req, u)
	for i := range c.Choices {
		c.Choices[i] = chatChoice{
			Index:        i,
			Message:      chatMessage{Role: "assistant", Content: &reply},
			FinishReason: "stop",
		}
	}
	s.writeJSON(w, mustMarshal(c), pl.cutAfter >= 0)
	return false
}

// newChatCompletion is a completion of req with req.N choices to fill in.
func newChatCompletion(id string, req *request, u usage) chatCompletion {
	return chatCompletion{
		ID:                id,
		Object:            "chat.completion",
		Created:           created,
		Model:             req.Model,
		SystemFingerprint: fingerprint,
		Choices:           make([]chatChoice, req.N),
		Usage:             u,
	}
}

// contentText returns the text of a message's content: the string itself,
// or the "text" members of a content-part array joined by a space. null or
// absent content (an assistant tool call) is empty.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	case '[':
		var parts []struct {
			Text *string `json:"text"`
		}
		if err := json.Unmarshal(raw, &parts); err != nil {
			return "", badRequest("", "Message content must be a string or an array of content parts")
		}
		var b strings.Builder
		n := 0
		for _, p := range parts {
			if p.Text == nil {
				continue
			}
			if n > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(*p.Text)
			n++
		}
		return b.String(), nil
	}
	return "", badRequest("", "Message content must be a string or an array of content parts")
}
