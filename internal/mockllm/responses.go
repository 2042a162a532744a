package mockllm

import (
	"context"
	"encoding/json"
	"net/http"
)

// responseObject is a Responses API response, as the official SDKs read it.
type responseObject struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Error              *struct{}         `json:"error"`
	IncompleteDetails  *struct{}         `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"` // responseItem or functionCallItem
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Store              bool              `json:"store"`
	Temperature        float64           `json:"temperature"`
	Text               map[string]any    `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []any             `json:"tools"`
	TopP               float64           `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              *responsesUsage   `json:"usage"`
	Metadata           map[string]string `json:"metadata"`
}

type responseItem struct {
	Type    string         `json:"type"`
	ID      string         `json:"id"`
	Status  string         `json:"status"`
	Role    string         `json:"role"`
	Content []responsePart `json:"content"`
}

// functionCallItem is a function_call output item.
type functionCallItem struct {
	Type      string `json:"type"` // function_call
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type responsePart struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
	Logprobs    []any  `json:"logprobs"`
}

type responsesUsage struct {
	InputTokens         int            `json:"input_tokens"`
	InputTokensDetails  map[string]int `json:"input_tokens_details"`
	OutputTokens        int            `json:"output_tokens"`
	OutputTokensDetails map[string]int `json:"output_tokens_details"`
	TotalTokens         int            `json:"total_tokens"`
}

// responsesRequest is what the mock reads of a Responses body.
type responsesRequest struct {
	Instructions       *string `json:"instructions"`
	MaxOutputTokens    *int    `json:"max_output_tokens"`
	PreviousResponseID *string `json:"previous_response_id"`
	Store              *bool   `json:"store"`
	Text               struct {
		Format json.RawMessage `json:"format"`
	} `json:"text"`
}

// responsesInput is what the mock reads of a Responses input.
type responsesInput struct {
	last   string // the text of the last user message
	words  int    // of all input text
	result string // the text of the last item, a tool's output
	ended  bool   // whether the last item is a tool's output
}

// inputText reads a Responses input: the string itself, or an item list
// whose messages' content is a string or parts with "text" and whose
// last item may be a tool's output (function_call_output or
// custom_tool_call_output, its output a string or parts).
func inputText(raw json.RawMessage) (in responsesInput, err error) {
	if len(raw) == 0 || raw[0] == '"' {
		s, err := contentText(raw)
		return responsesInput{last: s, words: wordCount(s)}, err
	}
	var items []struct {
		Type    string          `json:"type"`
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(raw, &items); err != nil {
		return in, badRequest("input", "'input' must be a string or an array of input items.")
	}
	if n := len(items); n > 0 && isToolOutput(items[n-1].Type) {
		in.result, _ = contentText(items[n-1].Output)
		in.ended = true
	}
	last, words := "", 0
	for _, it := range items {
		text, err := contentText(it.Content)
		if err != nil {
			return in, badRequest("input", "Input item content must be a string or an array of content parts.")
		}
		words += wordCount(text)
		if it.Role == "user" {
			last = text
		}
	}
	in.last, in.words = last, words
	return in, nil
}

// serveResponses answers POST /v1/responses. It reports whether the client
// went away before the answer was complete.
func (s *Server) serveResponses(w http.ResponseWriter, r *http.Request, body []byte, req *request, pl *plan, hash string) (gone bool) {
	var rr responsesRequest
	_ = json.Unmarshal(body, &rr) // the body already decoded once
	if len(req.Input) == 0 {
		s.writeBadRequest(w, "Missing required parameter: 'input'.", "input")
		return false
	}
	in, err := inputText(req.Input)
	if err != nil {
		s.writeRequestError(w, err)
		return false
	}
	last, words := in.last, in.words
	tool := wantsTool(req.Model)
	if tool && in.ended {
		last, tool = in.result, false // the call has its result: text
	}
	reply := replyPrefix + last
	textFormat := any(map[string]string{"type": "text"})
	if r, ok := structuredReply(rr.Text.Format, last); ok {
		reply, textFormat = r, rr.Text.Format // the format echoed, as OpenAI does
	}
	if req.Mock.Reply != nil {
		reply = *req.Mock.Reply
	}
	var item any = responseItem{Type: "message", ID: "msg_" + hash, Status: "completed", Role: "assistant",
		Content: []responsePart{{Type: "output_text", Text: reply, Annotations: []any{}, Logprobs: []any{}}}}
	if tool {
		tc := newToolCall(hash, last, req.Tools)
		reply = tc.args
		item = functionCallItem{Type: "function_call", ID: "fc_" + tc.id, CallID: "call_" + tc.id, Name: tc.name, Arguments: tc.args, Status: "completed"}
	}
	out := wordCount(reply)
	resp := responseObject{
		ID: "resp_" + hash, Object: "response", CreatedAt: created, Status: "completed",
		Instructions: rr.Instructions, MaxOutputTokens: rr.MaxOutputTokens, Model: req.Model,
		Output:            []any{item},
		ParallelToolCalls: true, PreviousResponseID: rr.PreviousResponseID, Store: rr.Store == nil || *rr.Store,
		Temperature: 1, Text: map[string]any{"format": textFormat}, ToolChoice: "auto",
		Tools: []any{}, TopP: 1, Truncation: "disabled", Metadata: map[string]string{},
		Usage: &responsesUsage{InputTokens: max(words, 1), OutputTokens: out, TotalTokens: max(words, 1) + out,
			InputTokensDetails: map[string]int{"cached_tokens": 0}, OutputTokensDetails: map[string]int{"reasoning_tokens": 0}},
	}
	if !req.Stream {
		s.writeJSON(w, mustMarshal(resp), pl.cutAfter >= 0)
		return false
	}
	return s.streamResponses(w, r, &resp, reply, pl)
}

// streamResponses writes a Responses event stream: typed events
// ("event: <type>" + "data: {...}") with increasing sequence numbers and no
// [DONE], the text split into pl.chunks deltas; a cut aborts it where
// pl.cutAfter says, before response.completed.
func (s *Server) streamResponses(w http.ResponseWriter, r *http.Request, resp *responseObject, reply string, pl *plan) (gone bool) {
	ctx, ew := s.startStream(w, r)
	defer ew.stop()
	seq := 0
	send := func(typ string, ev map[string]any) bool {
		ev["sequence_number"] = seq
		seq++
		return ew.typed(ctx, typ, ev)
	}
	pending := *resp
	pending.Status, pending.Output, pending.Usage = "in_progress", []any{}, nil
	if fc, ok := resp.Output[0].(functionCallItem); ok {
		return s.streamFunctionCall(ctx, w, ew, send, &pending, resp, fc, pl)
	}
	item := resp.Output[0].(responseItem)
	open := item
	open.Status, open.Content = "in_progress", []responsePart{}
	loc := func(ev map[string]any) map[string]any {
		ev["item_id"], ev["output_index"], ev["content_index"] = item.ID, 0, 0
		return ev
	}
	if !send("response.created", map[string]any{"response": &pending}) ||
		!send("response.in_progress", map[string]any{"response": &pending}) ||
		!send("response.output_item.added", map[string]any{"output_index": 0, "item": open}) ||
		!send("response.content_part.added", loc(map[string]any{"part": responsePart{Type: "output_text", Text: "", Annotations: []any{}, Logprobs: []any{}}})) {
		return true
	}
	pieces := split(reply, pl.chunks)
	if s.pace(ctx, w, ew, pl, len(pieces), func(k int) bool {
		return send("response.output_text.delta", loc(map[string]any{"delta": pieces[k], "logprobs": []any{}}))
	}) {
		return true
	}
	if !send("response.output_text.done", loc(map[string]any{"text": reply, "logprobs": []any{}})) ||
		!send("response.content_part.done", loc(map[string]any{"part": item.Content[0]})) ||
		!send("response.output_item.done", map[string]any{"output_index": 0, "item": item}) {
		return true
	}
	return !send("response.completed", map[string]any{"response": resp})
}

// streamFunctionCall writes the events of a response whose one output
// item is fc: response.created, response.in_progress,
// response.output_item.added (the call in_progress, arguments empty), one
// response.function_call_arguments.delta per piece, its .done,
// response.output_item.done and response.completed.
func (s *Server) streamFunctionCall(ctx context.Context, w http.ResponseWriter, ew *eventWriter, send func(string, map[string]any) bool,
	pending, resp *responseObject, fc functionCallItem, pl *plan) (gone bool) {
	open := fc
	open.Status, open.Arguments = "in_progress", ""
	if !send("response.created", map[string]any{"response": pending}) ||
		!send("response.in_progress", map[string]any{"response": pending}) ||
		!send("response.output_item.added", map[string]any{"output_index": 0, "item": open}) {
		return true
	}
	pieces := split(fc.Arguments, pl.chunks)
	if s.pace(ctx, w, ew, pl, len(pieces), func(k int) bool {
		return send("response.function_call_arguments.delta", map[string]any{"item_id": fc.ID, "output_index": 0, "delta": pieces[k]})
	}) {
		return true
	}
	if !send("response.function_call_arguments.done", map[string]any{"item_id": fc.ID, "output_index": 0, "arguments": fc.Arguments}) ||
		!send("response.output_item.done", map[string]any{"output_index": 0, "item": fc}) {
		return true
	}
	return !send("response.completed", map[string]any{"response": resp})
}
