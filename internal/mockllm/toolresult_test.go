package mockllm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

// toolTurn is a second turn of a tool-calling conversation on one API:
// the body with the tool's result last, and how to read the text of a
// plain answer and of a stream's events.
type toolTurn struct {
	name, path, body string
	plainText        func(t *testing.T, b []byte) (text, stop string)
	streamText       func(t *testing.T, events []string) (text, stop string)
}

func chatText(t *testing.T, b []byte) (string, string) {
	var c struct {
		Choices []struct {
			Message struct {
				Content   *string           `json:"content"`
				ToolCalls []json.RawMessage `json:"tool_calls"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(b, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("chat answer %s: %v", b, err)
	}
	m := c.Choices[0].Message
	if m.Content == nil || len(m.ToolCalls) > 0 {
		return "<tool call>", c.Choices[0].FinishReason
	}
	return *m.Content, c.Choices[0].FinishReason
}

func chatStreamText(t *testing.T, events []string) (string, string) {
	var text strings.Builder
	stop, called := "", false
	for _, e := range events {
		if e == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content   *string           `json:"content"`
					ToolCalls []json.RawMessage `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &c); err != nil {
			t.Fatalf("chunk %s: %v", e, err)
		}
		for _, ch := range c.Choices {
			if len(ch.Delta.ToolCalls) > 0 {
				called = true
			}
			if ch.Delta.Content != nil {
				text.WriteString(*ch.Delta.Content)
			}
			if ch.FinishReason != nil {
				stop = *ch.FinishReason
			}
		}
	}
	if called {
		return "<tool call>", stop
	}
	return text.String(), stop
}

func responsesText(t *testing.T, b []byte) (string, string) {
	var r struct {
		Output []struct {
			Type    string `json:"type"`
			Content []struct {
				Text string `json:"text"`
			} `json:"content"`
		} `json:"output"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Output) != 1 {
		t.Fatalf("response %s: %v", b, err)
	}
	if r.Output[0].Type != "message" || len(r.Output[0].Content) != 1 {
		return "<" + r.Output[0].Type + ">", r.Status
	}
	return r.Output[0].Content[0].Text, r.Status
}

func responsesStreamText(t *testing.T, events []string) (string, string) {
	var text strings.Builder
	stop, called := "", false
	for _, e := range events {
		var ev struct {
			Type     string          `json:"type"`
			Delta    string          `json:"delta"`
			Response json.RawMessage `json:"response"`
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			called = true
		case "response.completed":
			final, _ := responsesText(t, ev.Response)
			if !called && final != text.String() {
				t.Errorf("response.completed holds %q; the deltas %q", final, text.String())
			}
			stop = "completed"
		}
	}
	if called {
		return "<tool call>", stop
	}
	return text.String(), stop
}

func messagesText(t *testing.T, b []byte) (string, string) {
	var m struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StopReason string `json:"stop_reason"`
	}
	if err := json.Unmarshal(b, &m); err != nil || len(m.Content) != 1 {
		t.Fatalf("message %s: %v", b, err)
	}
	if m.Content[0].Type != "text" {
		return "<" + m.Content[0].Type + ">", m.StopReason
	}
	return m.Content[0].Text, m.StopReason
}

func messagesStreamText(t *testing.T, events []string) (string, string) {
	var text strings.Builder
	stop, called := "", false
	for _, e := range events {
		var ev struct {
			Type  string `json:"type"`
			Delta struct {
				Type       string `json:"type"`
				Text       string `json:"text"`
				StopReason string `json:"stop_reason"`
			} `json:"delta"`
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil {
			t.Fatalf("event %s: %v", e, err)
		}
		switch {
		case ev.Type == "content_block_delta" && ev.Delta.Type == "text_delta":
			text.WriteString(ev.Delta.Text)
		case ev.Type == "content_block_delta":
			called = true
		case ev.Type == "message_delta":
			stop = ev.Delta.StopReason
		}
	}
	if called {
		return "<tool call>", stop
	}
	return text.String(), stop
}

// TestToolResultAnsweredWithText: a tool-calling model answers a
// conversation whose last message is a tool's result with text (the
// result's text after the reply prefix, a plain stop), on chat, the
// Responses API and Messages, streamed and not, so an agent's loop ends;
// a conversation that goes on after the result still gets a call.
func TestToolResultAnsweredWithText(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 3})
	chatTurn := `"model":"mock-tool","tools":[{"type":"function","function":{"name":"get_weather"}}],"messages":[` +
		`{"role":"user","content":"weather in Paris"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"sunny, 22 C"}`
	respTurn := `"model":"gpt-4o-tool","tools":[{"type":"function","name":"get_weather","parameters":{"type":"object"}}],"input":[` +
		`{"role":"user","content":"weather in Paris"},` +
		`{"type":"function_call","call_id":"call_1","name":"get_weather","arguments":"{}"},`
	msgTurn := `"model":"claude-sonnet-5-5-tool","max_tokens":256,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"messages":[` +
		`{"role":"user","content":"weather in Paris"},` +
		`{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]},`
	const want = "mock reply to: sunny, 22 C"
	tests := []struct {
		toolTurn
		want, wantStop string
	}{
		{toolTurn{"chat", "/v1/chat/completions", chatTurn + `]`, chatText, chatStreamText}, want, "stop"},
		{toolTurn{"chat, user after the result", "/v1/chat/completions", chatTurn + `,{"role":"user","content":"and Rome?"}]`, chatText, chatStreamText}, "<tool call>", "tool_calls"},
		{toolTurn{"responses function_call_output", "/v1/responses",
			respTurn + `{"type":"function_call_output","call_id":"call_1","output":"sunny, 22 C"}]`, responsesText, responsesStreamText}, want, "completed"},
		{toolTurn{"responses custom_tool_call_output, parts", "/v1/responses",
			respTurn + `{"type":"custom_tool_call_output","call_id":"call_1","output":[{"type":"input_text","text":"sunny, 22 C"}]}]`, responsesText, responsesStreamText}, want, "completed"},
		{toolTurn{"responses, user after the result", "/v1/responses",
			respTurn + `{"type":"function_call_output","call_id":"call_1","output":"sunny"},{"role":"user","content":"and Rome?"}]`, responsesText, responsesStreamText}, "<function_call>", "completed"},
		{toolTurn{"messages tool_result", "/v1/messages",
			msgTurn + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny, 22 C"}]}]`, messagesText, messagesStreamText}, want, "end_turn"},
		{toolTurn{"messages tool_result with text blocks", "/v1/messages",
			msgTurn + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"sunny, 22 C"}]}]}]`, messagesText, messagesStreamText}, want, "end_turn"},
		{toolTurn{"messages, text after the result", "/v1/messages",
			msgTurn + `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"sunny"},{"type":"text","text":"and Rome?"}]}]`, messagesText, messagesStreamText}, "<tool_use>", "tool_use"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := post(t, ts, tt.path, "{"+tt.body+"}")
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			if text, stop := tt.plainText(t, b); text != tt.want || stop != tt.wantStop {
				t.Errorf("plain answer: %q, %s; want %q, %s", text, stop, tt.want, tt.wantStop)
			}
			resp, events, err := postStream(t, ts, tt.path, `{"stream":true,`+tt.body+"}")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream: %d, %v", resp.StatusCode, err)
			}
			wantStream := tt.want
			if strings.HasPrefix(wantStream, "<") {
				wantStream = "<tool call>"
			}
			if text, stop := tt.streamText(t, events); text != wantStream || stop != tt.wantStop {
				t.Errorf("stream: %q, %s; want %q, %s", text, stop, wantStream, tt.wantStop)
			}
		})
	}
}
