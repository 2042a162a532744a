package mockllm_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/corralhq/corral/internal/mockllm"
)

// TestMessagesWithAnthropicSDK checks the mock's Messages API against the
// official anthropic-sdk-go client: a plain message, a stream its
// accumulator assembles into the same message, count_tokens, and injected
// failures (a 404 and Anthropic's 529) as the SDK's errors.
func TestMessagesWithAnthropicSDK(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 3})
	c := anthropic.NewClient(aoption.WithBaseURL(ts.URL), aoption.WithAPIKey("sk-ant-test"), aoption.WithMaxRetries(0))
	ctx := testContext(t)
	params := anthropic.MessageNewParams{Model: "claude-sonnet-4-5", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hello claude"))}}

	m, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Content) != 1 || m.Content[0].Text != "mock reply to: hello claude" || m.StopReason != "end_turn" || m.Usage.OutputTokens != 5 {
		t.Fatalf("Messages.New = %+v", m)
	}

	st := c.Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	var types []string
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if acc.ID != m.ID || len(acc.Content) != 1 || acc.Content[0].Text != m.Content[0].Text || acc.StopReason != "end_turn" || acc.Usage.OutputTokens != m.Usage.OutputTokens {
		t.Errorf("accumulated stream = %+v; want the plain message %+v", acc, m)
	}
	if types[0] != "message_start" || types[len(types)-1] != "message_stop" {
		t.Errorf("event types %v", types)
	}

	n, err := c.Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "claude-sonnet-4-5",
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("one two three"))}})
	if err != nil || n.InputTokens != 3 {
		t.Errorf("CountTokens = %+v, %v; want 3", n, err)
	}

	for _, tt := range []struct {
		model string
		want  int
	}{{"mock-404", 404}, {"mock-529", 529}, {"mock-429", 429}} {
		_, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: tt.model, MaxTokens: 8,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("x"))}})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.want {
			t.Errorf("%s = %v; want the SDK's %d", tt.model, err, tt.want)
		}
	}
}

func TestMessagesErrorShape(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	resp, err := http.Post(ts.URL+"/v1/messages", "application/json", strings.NewReader(`{"model":"mock-404","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || string(b) != `{"error":{"message":"Injected error 404 for model mock-404.","type":"not_found_error"},"type":"error"}` {
		t.Errorf("mock-404 = %d %s", resp.StatusCode, b)
	}
}
