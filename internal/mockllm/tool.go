package mockllm

import (
	"encoding/json"
	"net/http"
	"strings"
)

// defaultToolName is the function the mock calls when the request defines
// no tool with a name.
const defaultToolName = "mock_tool"

// toolModel is the model name that makes the mock answer with a tool call;
// so does any name ending in toolSuffix.
const (
	toolModel  = "mock-tool"
	toolSuffix = "-tool"
)

// wantsTool reports whether model asks for a tool call instead of text.
func wantsTool(model string) bool {
	return model == toolModel || strings.HasSuffix(model, toolSuffix)
}

// A tool-calling model answers a conversation that ends in a tool's
// result with text, replyPrefix and the result's text, as a model answers
// once it has what it asked for: calling a tool on every turn would keep
// an agent looping until its turn limit.

// chatToolResult is the text of a chat conversation's last message when
// it is a tool's result (role "tool", or the legacy "function").
func chatToolResult(msgs []message) (text string, ok bool) {
	if len(msgs) == 0 {
		return "", false
	}
	last := msgs[len(msgs)-1]
	if last.Role != "tool" && last.Role != "function" {
		return "", false
	}
	text, _ = contentText(last.Content) // read once already
	return text, true
}

// messagesToolResult is the text of a Messages conversation's last block
// when it is a tool_result: the last block of the last message, a user
// message. Its content is a string or text blocks.
func messagesToolResult(msgs []message) (text string, ok bool) {
	if len(msgs) == 0 || msgs[len(msgs)-1].Role != "user" {
		return "", false
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(msgs[len(msgs)-1].Content, &blocks) != nil || len(blocks) == 0 || blocks[len(blocks)-1].Type != "tool_result" {
		return "", false
	}
	text, _ = contentText(blocks[len(blocks)-1].Content)
	return text, true
}

// isToolOutput reports whether a Responses input item of type typ is a
// tool's result.
func isToolOutput(typ string) bool {
	return typ == "function_call_output" || typ == "custom_tool_call_output"
}

// toolCall is the one call a tool-calling answer makes. Everything in it
// is derived from the request, so the same request always gets the same
// call, streamed or not.
type toolCall struct {
	id   string // without the API's prefix (call_, fc_, toolu_)
	name string
	args string // a JSON object, compact
}

// newToolCall derives the call for a request whose hash is hash, whose
// last user text is last and whose "tools" member is tools: its
// arguments are a value of the tool's input schema (see toolArguments).
func newToolCall(hash, last string, tools json.RawMessage) toolCall {
	name, schema := firstTool(tools)
	return toolCall{id: hash, name: name, args: toolArguments(schema, last)}
}

// firstTool is the name and input schema of the first tool in a
// request's tool list that has a name: chat's {"type":"function",
// "function":{"name":...,"parameters":...}}, the Responses API's
// {"name":...,"parameters":...} or Messages' {"name":...,
// "input_schema":...}. Hosted tools without a name (web_search, ...) are
// skipped; with none left it is defaultToolName, with no schema.
func firstTool(raw json.RawMessage) (name string, schema json.RawMessage) {
	var tools []struct {
		Name        string          `json:"name"`
		Parameters  json.RawMessage `json:"parameters"`
		InputSchema json.RawMessage `json:"input_schema"`
		Function    struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if json.Unmarshal(raw, &tools) != nil {
		return defaultToolName, nil
	}
	for _, t := range tools {
		if t.Name != "" {
			if len(t.InputSchema) > 0 {
				return t.Name, t.InputSchema
			}
			return t.Name, t.Parameters
		}
		if t.Function.Name != "" {
			return t.Function.Name, t.Function.Parameters
		}
	}
	return defaultToolName, nil
}

// chatChunk is one chat.completion.chunk of a streamed tool call.
type chatChunk struct {
	ID                string            `json:"id"`
	Object            string            `json:"object"`
	Created           int64             `json:"created"`
	Model             string            `json:"model"`
	SystemFingerprint string            `json:"system_fingerprint"`
	Choices           []chatChunkChoice `json:"choices"`
	Usage             *usage            `json:"usage,omitempty"`
}

type chatChunkChoice struct {
	Index        int            `json:"index"`
	Delta        map[string]any `json:"delta"`
	Logprobs     *struct{}      `json:"logprobs"` // always null
	FinishReason *string        `json:"finish_reason"`
}

// serveChatTool answers a chat request with tc in every choice,
// finish_reason "tool_calls". Streamed, each choice gets a chunk with the
// role, the call's id and name and empty arguments, then the arguments in
// pl.chunks fragments, then the finish chunk, as OpenAI streams a call.
func (s *Server) serveChatTool(w http.ResponseWriter, r *http.Request, req *request, pl *plan, id string, tc toolCall, words int) (gone bool) {
	u := newUsage(words, wordCount(tc.args)*req.N)
	call := chatToolCall{ID: "call_" + tc.id, Type: "function"}
	call.Function.Name, call.Function.Arguments = tc.name, tc.args
	if !req.Stream {
		c := newChatCompletion(id, req, u)
		for i := range c.Choices {
			c.Choices[i] = chatChoice{Index: i, Message: chatMessage{Role: "assistant", ToolCalls: []chatToolCall{call}}, FinishReason: "tool_calls"}
		}
		s.writeJSON(w, mustMarshal(c), pl.cutAfter >= 0)
		return false
	}

	ctx, ew := s.startStream(w, r)
	defer ew.stop()
	includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
	send := func(choice int, delta map[string]any, finish *string) bool {
		c := chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model, SystemFingerprint: fingerprint,
			Choices: []chatChunkChoice{{Index: choice, Delta: delta, FinishReason: finish}}}
		ew.buf = append(ew.buf[:0], "data: "...)
		ew.buf = append(ew.buf, mustMarshal(c)...)
		if includeUsage {
			ew.buf = append(ew.buf[:len(ew.buf)-1], `,"usage":null}`...)
		}
		ew.buf = append(ew.buf, "\n\n"...)
		return ew.send(ctx)
	}
	for i := range req.N {
		first := map[string]any{"index": 0, "id": call.ID, "type": "function", "function": map[string]string{"name": tc.name, "arguments": ""}}
		if !send(i, map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []any{first}}, nil) {
			return true
		}
	}
	pieces := split(tc.args, pl.chunks)
	if s.pace(ctx, w, ew, pl, len(pieces), func(k int) bool {
		for i := range req.N {
			frag := map[string]any{"index": 0, "function": map[string]string{"arguments": pieces[k]}}
			if !send(i, map[string]any{"tool_calls": []any{frag}}, nil) {
				return false
			}
		}
		return true
	}) {
		return true
	}
	finish := "tool_calls"
	for i := range req.N {
		if !send(i, map[string]any{}, &finish) {
			return true
		}
	}
	if includeUsage {
		c := chatChunk{ID: id, Object: "chat.completion.chunk", Created: created, Model: req.Model, SystemFingerprint: fingerprint,
			Choices: []chatChunkChoice{}, Usage: &u}
		ew.buf = append(append(append(ew.buf[:0], "data: "...), mustMarshal(c)...), "\n\n"...)
		if !ew.send(ctx) {
			return true
		}
	}
	ew.buf = append(ew.buf[:0], "data: [DONE]\n\n"...)
	return !ew.send(ctx)
}
