package mockllm_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/corralhq/corral/internal/mockllm"
)

// call is one tool call as an SDK hands it to its caller.
type call struct{ ID, Name, Args string }

const wantArgs = `{"input":"weather in Paris"}`

// TestToolCallChatWithOpenAIGo checks mock-tool's chat answer against
// openai-go: the plain answer's tool call, and a stream of argument
// fragments that the SDK's ChatCompletionAccumulator turns into the same
// call, with finish_reason "tool_calls" on both.
func TestToolCallChatWithOpenAIGo(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 4})
	c := officialopenai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ctx := testContext(t)
	p := officialopenai.ChatCompletionNewParams{Model: "mock-tool",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("weather in Paris")},
		Tools:    []officialopenai.ChatCompletionToolUnionParam{officialopenai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "get_weather"})}}

	plain, err := c.Chat.Completions.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Choices) != 1 || len(plain.Choices[0].Message.ToolCalls) != 1 || plain.Choices[0].FinishReason != "tool_calls" {
		t.Fatalf("plain answer = %s", plain.RawJSON())
	}
	tc := plain.Choices[0].Message.ToolCalls[0]
	got := call{tc.ID, tc.Function.Name, tc.Function.Arguments}
	if !strings.HasPrefix(got.ID, "call_") || got.Name != "get_weather" || got.Args != wantArgs {
		t.Errorf("plain call = %+v; want call_…, get_weather, %s", got, wantArgs)
	}

	st := c.Chat.Completions.NewStreaming(ctx, p)
	var acc officialopenai.ChatCompletionAccumulator
	fragments := 0
	for st.Next() {
		ch := st.Current()
		acc.AddChunk(ch)
		if len(ch.Choices) > 0 && len(ch.Choices[0].Delta.ToolCalls) > 0 && ch.Choices[0].Delta.ToolCalls[0].Function.Arguments != "" {
			fragments++
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	stc := acc.Choices[0].Message.ToolCalls[0]
	if s := (call{stc.ID, stc.Function.Name, stc.Function.Arguments}); s != got || fragments != 4 || acc.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("streamed call = %+v in %d fragments, finish %q; want %+v in 4, tool_calls", s, fragments, acc.Choices[0].FinishReason, got)
	}
}

// TestToolCallResponsesWithOpenAIGo checks a function_call output item,
// plain and streamed (output_item.added, argument deltas, .done,
// output_item.done, response.completed), through openai-go.
func TestToolCallResponsesWithOpenAIGo(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 3})
	c := officialopenai.NewClient(option.WithBaseURL(ts.URL+"/v1"), option.WithAPIKey("sk-test"), option.WithMaxRetries(0))
	ctx := testContext(t)
	p := responses.ResponseNewParams{Model: "gpt-4o-tool", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("weather in Paris")},
		Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("get_weather", map[string]any{"type": "object"}, false)}}

	plain, err := c.Responses.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Output) != 1 || plain.Output[0].Type != "function_call" {
		t.Fatalf("plain output = %s", plain.RawJSON())
	}
	fc := plain.Output[0].AsFunctionCall()
	got := call{fc.CallID, fc.Name, fc.Arguments}
	if !strings.HasPrefix(got.ID, "call_") || !strings.HasPrefix(fc.ID, "fc_") || got.Name != "get_weather" || got.Args != wantArgs || fc.Status != "completed" {
		t.Errorf("plain call = %+v (item %s, %s)", got, fc.ID, fc.Status)
	}

	st := c.Responses.NewStreaming(ctx, p)
	var types []string
	var args strings.Builder
	var final responses.Response
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		switch ev.Type {
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	want := "response.created response.in_progress response.output_item.added " +
		strings.Repeat("response.function_call_arguments.delta ", 3) +
		"response.function_call_arguments.done response.output_item.done response.completed"
	if strings.Join(types, " ") != want {
		t.Errorf("events = %v; want %s", types, want)
	}
	sfc := final.Output[0].AsFunctionCall()
	if s := (call{sfc.CallID, sfc.Name, sfc.Arguments}); s != got || args.String() != wantArgs || final.ID != plain.ID {
		t.Errorf("streamed call = %+v, deltas %q; want %+v", s, args.String(), got)
	}
}

// TestToolCallMessagesWithAnthropicSDK checks a tool_use block, plain and
// streamed as input_json_delta fragments, through anthropic-sdk-go's
// Message.Accumulate; without tools the call is to mock_tool.
func TestToolCallMessagesWithAnthropicSDK(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 3})
	c := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	ctx := testContext(t)
	p := anthropic.MessageNewParams{Model: "mock-tool", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris"))},
		Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{}, "get_weather")}}

	plain, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(plain.Content) != 1 || plain.Content[0].Type != "tool_use" || plain.StopReason != "tool_use" {
		t.Fatalf("plain answer = %s", plain.RawJSON())
	}
	b := plain.Content[0]
	got := call{b.ID, b.Name, string(b.Input)}
	if !strings.HasPrefix(got.ID, "toolu_") || got.Name != "get_weather" || got.Args != wantArgs {
		t.Errorf("plain call = %+v", got)
	}

	st := c.Messages.NewStreaming(ctx, p)
	var acc anthropic.Message
	fragments := 0
	for st.Next() {
		ev := st.Current()
		if ev.Type == "content_block_delta" && ev.Delta.Type == "input_json_delta" {
			fragments++
		}
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	sb := acc.Content[0]
	if s := (call{sb.ID, sb.Name, string(sb.Input)}); s != got || fragments != 3 || acc.StopReason != "tool_use" {
		t.Errorf("streamed call = %+v in %d fragments, stop %q; want %+v in 3, tool_use", s, fragments, acc.StopReason, got)
	}

	p.Tools = nil
	bare, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if bare.Content[0].Name != "mock_tool" || !json.Valid(bare.Content[0].Input) {
		t.Errorf("without tools: %s", bare.RawJSON())
	}
}
