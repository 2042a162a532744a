package server

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
	goopenai "github.com/sashabaranov/go-openai"
)

// A tool call the mock makes (model mock-tool) is cached and replayed as a
// stream; what each SDK's own accumulator makes of the replay must be the
// call the first answer carried, byte for byte: an agent runs the tool the
// arguments name, so one byte off is another command.

// toolCall is one tool call as an SDK hands it to its caller, and the
// answer's X-Corral-Cache.
type toolCall struct {
	ID, Name, Args string
	cache          string
}

func (c toolCall) same(o toolCall) bool { return c.ID == o.ID && c.Name == o.Name && c.Args == o.Args }

// checkReplay asks first and then second for the same prompt and wants a
// MISS, then a HIT carrying the identical call, with one upstream call.
func checkReplay(t *testing.T, h *harness, path, prompt string, first, second func(prompt string) toolCall) {
	t.Helper()
	before := h.mock.Stats().Paths[path]
	a := first(prompt)
	b := second(prompt)
	if a.cache != "MISS" || b.cache != "HIT" {
		t.Errorf("%q: cache %s then %s; want MISS then HIT", prompt, a.cache, b.cache)
	}
	if a.ID == "" || a.Name != "get_weather" || !strings.Contains(a.Args, "input") {
		t.Errorf("%q: first call %+v; want the mock's call to get_weather", prompt, a)
	}
	if !a.same(b) {
		t.Errorf("%q: replayed call differs:\n first  %+v\n replay %+v", prompt, a, b)
	}
	if n := h.mock.Stats().Paths[path] - before; n != 1 {
		t.Errorf("%q: %d upstream calls; want 1", prompt, n)
	}
}

func chatToolParams(prompt string) officialopenai.ChatCompletionNewParams {
	return officialopenai.ChatCompletionNewParams{Model: "mock-tool",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage(prompt)},
		Tools:    []officialopenai.ChatCompletionToolUnionParam{officialopenai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"})}}
}

func TestToolCallReplayChatOpenAIGo(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	c := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	ctx := t.Context()
	streamed := func(prompt string) toolCall {
		var raw *http.Response
		st := c.Chat.Completions.NewStreaming(ctx, chatToolParams(prompt), option.WithResponseInto(&raw))
		var acc officialopenai.ChatCompletionAccumulator
		for st.Next() {
			acc.AddChunk(st.Current())
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" {
			t.Fatalf("accumulated %+v", acc.ChatCompletion)
		}
		tc := acc.Choices[0].Message.ToolCalls[0]
		return toolCall{tc.ID, tc.Function.Name, tc.Function.Arguments, raw.Header.Get("X-Corral-Cache")}
	}
	plain := func(prompt string) toolCall {
		var raw *http.Response
		r, err := c.Chat.Completions.New(ctx, chatToolParams(prompt), option.WithResponseInto(&raw))
		if err != nil || len(r.Choices) != 1 || len(r.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("New: %v %+v", err, r)
		}
		tc := r.Choices[0].Message.ToolCalls[0]
		return toolCall{tc.ID, tc.Function.Name, tc.Function.Arguments, raw.Header.Get("X-Corral-Cache")}
	}
	checkReplay(t, h, "/v1/chat/completions", "weather in Paris", streamed, streamed)
	checkReplay(t, h, "/v1/chat/completions", "weather in Rome", plain, streamed)
}

func TestToolCallReplayChatGoOpenAI(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	cfg := goopenai.DefaultConfig(acmeKey)
	cfg.BaseURL = h.gw.URL + "/v1"
	c := goopenai.NewClientWithConfig(cfg)
	ctx := t.Context()
	req := func(prompt string) goopenai.ChatCompletionRequest {
		return goopenai.ChatCompletionRequest{Model: "mock-tool",
			Messages: []goopenai.ChatCompletionMessage{{Role: goopenai.ChatMessageRoleUser, Content: prompt}},
			Tools:    []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{Name: "get_weather"}}}}
	}
	streamed := func(prompt string) toolCall {
		st, err := c.CreateChatCompletionStream(ctx, req(prompt))
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		defer st.Close()
		// go-openai has no accumulator: a call is its first fragment's id
		// and name and the concatenated arguments, by index, as its
		// README shows.
		var tc toolCall
		finish := goopenai.FinishReason("")
		for {
			ch, err := st.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("Recv: %v", err)
			}
			if len(ch.Choices) == 0 {
				continue
			}
			for _, d := range ch.Choices[0].Delta.ToolCalls {
				if d.Index == nil || *d.Index != 0 {
					t.Fatalf("tool call fragment without index 0: %+v", d)
				}
				if d.ID != "" {
					tc.ID, tc.Name = d.ID, d.Function.Name
				}
				tc.Args += d.Function.Arguments
			}
			if ch.Choices[0].FinishReason != "" {
				finish = ch.Choices[0].FinishReason
			}
		}
		if finish != goopenai.FinishReasonToolCalls {
			t.Errorf("finish_reason %q", finish)
		}
		tc.cache = st.Header().Get("X-Corral-Cache")
		return tc
	}
	plain := func(prompt string) toolCall {
		r, err := c.CreateChatCompletion(ctx, req(prompt))
		if err != nil || len(r.Choices) != 1 || len(r.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("CreateChatCompletion: %v %+v", err, r)
		}
		tc := r.Choices[0].Message.ToolCalls[0]
		return toolCall{tc.ID, tc.Function.Name, tc.Function.Arguments, r.Header().Get("X-Corral-Cache")}
	}
	checkReplay(t, h, "/v1/chat/completions", "weather in Paris", streamed, streamed)
	checkReplay(t, h, "/v1/chat/completions", "weather in Rome", plain, streamed)
}

func responsesToolParams(prompt string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "mock-tool", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String(prompt)},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}}
}

func TestToolCallReplayResponsesOpenAIGo(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	c := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	ctx := t.Context()
	streamed := func(prompt string) toolCall {
		var raw *http.Response
		st := c.Responses.NewStreaming(ctx, responsesToolParams(prompt), option.WithResponseInto(&raw))
		// The events, as a client renders them while they arrive: the
		// call's id and name from output_item.added, its arguments from
		// the deltas; then the completed response, which must agree.
		var live toolCall
		var final responses.Response
		for st.Next() {
			ev := st.Current()
			switch ev.Type {
			case "response.output_item.added":
				fc := ev.Item.AsFunctionCall()
				live.ID, live.Name = fc.CallID, fc.Name
			case "response.function_call_arguments.delta":
				live.Args += ev.Delta
			case "response.function_call_arguments.done":
				if ev.Arguments != live.Args {
					t.Errorf("arguments.done %q; deltas %q", ev.Arguments, live.Args)
				}
			case "response.completed":
				final = ev.Response
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(final.Output) != 1 || final.Output[0].Type != "function_call" {
			t.Fatalf("completed response %s", final.RawJSON())
		}
		fc := final.Output[0].AsFunctionCall()
		done := toolCall{ID: fc.CallID, Name: fc.Name, Args: fc.Arguments}
		if !done.same(live) {
			t.Errorf("completed call %+v; events %+v", done, live)
		}
		live.cache = raw.Header.Get("X-Corral-Cache")
		return live
	}
	plain := func(prompt string) toolCall {
		var raw *http.Response
		r, err := c.Responses.New(ctx, responsesToolParams(prompt), option.WithResponseInto(&raw))
		if err != nil || len(r.Output) != 1 {
			t.Fatalf("New: %v %+v", err, r)
		}
		fc := r.Output[0].AsFunctionCall()
		return toolCall{fc.CallID, fc.Name, fc.Arguments, raw.Header.Get("X-Corral-Cache")}
	}
	checkReplay(t, h, "/v1/responses", "weather in Paris", streamed, streamed)
	checkReplay(t, h, "/v1/responses", "weather in Rome", plain, streamed)
}

func messagesToolParams(prompt string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: "claude-sonnet-4-5-tool", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(prompt))},
		Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, "get_weather")}}
}

func TestToolCallReplayMessagesAnthropicSDK(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	c := claudeClient(h.gw.URL, acmeKey)
	ctx := t.Context()
	streamed := func(prompt string) toolCall {
		var raw *http.Response
		st := c.Messages.NewStreaming(ctx, messagesToolParams(prompt), aoption.WithResponseInto(&raw))
		var acc anthropic.Message
		for st.Next() {
			if err := acc.Accumulate(st.Current()); err != nil {
				t.Fatalf("Accumulate: %v", err)
			}
		}
		if err := st.Err(); err != nil {
			t.Fatalf("stream: %v", err)
		}
		if len(acc.Content) != 1 || acc.Content[0].Type != "tool_use" || acc.StopReason != "tool_use" {
			t.Fatalf("accumulated %+v", acc)
		}
		b := acc.Content[0]
		return toolCall{b.ID, b.Name, string(b.Input), raw.Header.Get("X-Corral-Cache")}
	}
	plain := func(prompt string) toolCall {
		var raw *http.Response
		m, err := c.Messages.New(ctx, messagesToolParams(prompt), aoption.WithResponseInto(&raw))
		if err != nil || len(m.Content) != 1 {
			t.Fatalf("New: %v %+v", err, m)
		}
		b := m.Content[0]
		return toolCall{b.ID, b.Name, string(b.Input), raw.Header.Get("X-Corral-Cache")}
	}
	checkReplay(t, h, "/v1/messages", "weather in Paris", streamed, streamed)
	checkReplay(t, h, "/v1/messages", "weather in Rome", plain, streamed)
}
