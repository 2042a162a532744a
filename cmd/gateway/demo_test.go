package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	oshared "github.com/openai/openai-go/v3/shared"
)

// demoContext ends with the test or after 20 s, so a fault fails the test
// instead of hanging it.
func demoContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// demoAnthropic is anthropic-sdk-go pointed at a running demo gateway
// with the demo key.
func demoAnthropic(addr string) anthropic.Client {
	return anthropic.NewClient(aoption.WithBaseURL("http://"+addr), aoption.WithAPIKey(DemoKey), aoption.WithMaxRetries(0))
}

// TestDemoAnthropicModels: through the demo gateway, anthropic-sdk-go's
// Models.Get finds the Claude models the README names (the current one
// and an older one) in Anthropic's shape, Models.List pages through them,
// and an unknown model is Anthropic's 404.
func TestDemoAnthropicModels(t *testing.T) {
	addr, _ := startDemo(t)
	c := demoAnthropic(addr)
	ctx := demoContext(t)
	for _, id := range []string{"claude-sonnet-5-5", "claude-sonnet-4-5"} {
		m, err := c.Models.Get(ctx, id, anthropic.ModelGetParams{})
		if err != nil {
			t.Fatalf("Models.Get(%s): %v", id, err)
		}
		if m.ID != id || m.Type != "model" || !strings.HasPrefix(m.DisplayName, "Claude Sonnet ") || m.CreatedAt.IsZero() {
			t.Errorf("Models.Get(%s) = %s", id, m.RawJSON())
		}
	}
	page, err := c.Models.List(ctx, anthropic.ModelListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if page.HasMore || !slices.Contains(ids, "claude-sonnet-5-5") || !slices.Contains(ids, "claude-opus-5-5") || page.FirstID != ids[0] {
		t.Errorf("Models.List = %s", page.RawJSON())
	}
	_, err = c.Models.Get(ctx, "claude-nonexistent", anthropic.ModelGetParams{})
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusNotFound || !strings.Contains(aerr.RawJSON(), `"not_found_error"`) {
		t.Errorf("Models.Get(unknown) = %v; want Anthropic's 404", err)
	}
}

// TestDemoBannerClaudeExample: the demo's banner prints a Messages curl
// line naming DemoClaudeModel, and that line's body, sent as printed,
// answers 200 with the mock's reply.
func TestDemoBannerClaudeExample(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo"}, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + t.TempDir()}, stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v after shutdown", err)
		}
	})
	m := stdout.waitFor(t, regexp.MustCompile(`curl -si (http://\S+/v1/messages) -H "x-api-key: `+DemoKey+`" -H "anthropic-version: 2023-06-01" -H "Content-Type: application/json" -d '([^']+)'`))
	if !strings.Contains(m[2], `"model":"`+DemoClaudeModel+`"`) {
		t.Fatalf("the banner's Messages example %s does not name %s", m[2], DemoClaudeModel)
	}
	req, _ := http.NewRequest(http.MethodPost, m[1], strings.NewReader(m[2]))
	req.Header.Set("X-Api-Key", DemoKey)
	req.Header.Set("Anthropic-Version", "2023-06-01")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"model":"`+DemoClaudeModel+`"`) || !strings.Contains(string(b), "mock reply to: Hello, Corral") {
		t.Errorf("the banner's Messages example = %d %s", resp.StatusCode, b)
	}
}

// TestREADMEClaudeExamplesCurrent: every Claude model the README's
// examples run (claude --model, model="...") is DemoClaudeModel (or its
// -tool variant), not an id Claude Code calls retired; older ids are
// named only where the README says the mock keeps them.
func TestREADMEClaudeExamplesCurrent(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, m := range regexp.MustCompile(`(?:--model |model="|model: )(claude-[a-z0-9-]+)`).FindAllStringSubmatch(string(b), -1) {
		found++
		if id := strings.TrimSuffix(m[1], "-tool"); id != DemoClaudeModel {
			t.Errorf("README example %q names %s; want %s", m[0], m[1], DemoClaudeModel)
		}
	}
	if found < 2 {
		t.Errorf("README has %d Claude examples; want the Claude Code and SDK ones", found)
	}
}

// TestDemoAgentLoopEnds: through the demo gateway, a tool-calling Claude
// model answers anthropic-sdk-go's first turn with a tool_use and the
// turn that carries its tool_result with text, so the agent's loop ends.
func TestDemoAgentLoopEnds(t *testing.T) {
	addr, _ := startDemo(t)
	c := demoAnthropic(addr)
	ctx := demoContext(t)
	p := anthropic.MessageNewParams{Model: DemoClaudeModel + "-tool", MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("weather in Paris"))},
		Tools: []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}, "get_weather")}}
	first, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if first.StopReason != "tool_use" || len(first.Content) != 1 || first.Content[0].Type != "tool_use" || !strings.Contains(string(first.Content[0].Input), `"city":`) {
		t.Fatalf("first turn = %s; want a tool_use with a city", first.RawJSON())
	}
	p.Messages = append(p.Messages, first.ToParam(),
		anthropic.NewUserMessage(anthropic.NewToolResultBlock(first.Content[0].ID, "sunny, 22 C", false)))
	second, err := c.Messages.New(ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	if second.StopReason != "end_turn" || len(second.Content) != 1 || second.Content[0].Text != "mock reply to: sunny, 22 C" {
		t.Errorf("second turn = %s; want text for the tool's result", second.RawJSON())
	}
}

// TestDemoStructuredOutput: through the demo gateway, openai-go's chat
// with a json_schema response_format gets content that decodes into the
// schema's shape with every required field.
func TestDemoStructuredOutput(t *testing.T) {
	addr, _ := startDemo(t)
	c := openai.NewClient(option.WithBaseURL("http://"+addr+"/v1"), option.WithAPIKey(DemoKey), option.WithMaxRetries(0))
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"city", "days", "tags"},
		"properties": map[string]any{"city": map[string]any{"type": "string", "minLength": 2},
			"days": map[string]any{"type": "integer", "minimum": 1}, "tags": map[string]any{"type": "array", "items": map[string]any{"type": "string"}, "minItems": 2}}}
	got, err := c.Chat.Completions.New(demoContext(t), openai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("plan a trip")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &oshared.ResponseFormatJSONSchemaParam{
			JSONSchema: oshared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "trip", Strict: openai.Bool(true), Schema: schema}}}})
	if err != nil {
		t.Fatal(err)
	}
	var trip struct {
		City *string  `json:"city"`
		Days *int     `json:"days"`
		Tags []string `json:"tags"`
	}
	dec := json.NewDecoder(strings.NewReader(got.Choices[0].Message.Content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&trip); err != nil || trip.City == nil || len(*trip.City) < 2 || trip.Days == nil || *trip.Days < 1 || len(trip.Tags) < 2 {
		t.Errorf("content %s: %v; want the schema's object", got.Choices[0].Message.Content, err)
	}
}
