package mockllm_test

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/corralhq/corral/internal/mockllm"
)

// recipeSchema is what Vercel AI SDK's generateObject sends for a Zod
// object: every property required, no others.
const recipeSchema = `{"type":"object","properties":{"name":{"type":"string"},"servings":{"type":"integer","minimum":1},` +
	`"ingredients":{"type":"array","items":{"type":"object","properties":{"item":{"type":"string"},"grams":{"type":"number"}},"required":["item","grams"],"additionalProperties":false},"minItems":2},` +
	`"diet":{"enum":["vegan","any"]}},"required":["name","servings","ingredients","diet"],"additionalProperties":false,"$schema":"http://json-schema.org/draft-07/schema#"}`

// mustValidate fails the test unless v is JSON that schema accepts.
func mustValidate(t *testing.T, schema, v string) {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("mem://s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem://s.json")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader([]byte(v)))
	if err != nil {
		t.Fatalf("answer %q is not JSON: %v", v, err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("answer %s does not validate: %v", v, err)
	}
}

// TestStructuredOutput: a JSON schema asked for in chat's response_format,
// the Responses API's text.format or Messages' output_config.format gets
// an answer that validates against it, streamed and not; json_object
// gets a JSON object.
func TestStructuredOutput(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 4})
	user := `"weather in Paris"`
	tests := []struct {
		name, path, body, schema string
		plain                    func(*testing.T, []byte) (string, string)
		stream                   func(*testing.T, []string) (string, string)
	}{
		{"chat json_schema", "/v1/chat/completions",
			`"model":"gpt-4o-mini","messages":[{"role":"user","content":` + user + `}],"response_format":{"type":"json_schema","json_schema":{"name":"recipe","strict":true,"schema":` + recipeSchema + `}}`,
			recipeSchema, chatText, chatStreamText},
		{"chat json_object", "/v1/chat/completions",
			`"model":"gpt-4o-mini","messages":[{"role":"user","content":` + user + `}],"response_format":{"type":"json_object"}`,
			`{"type":"object","properties":{"reply":{"const":"mock reply to: weather in Paris"}},"required":["reply"]}`, chatText, chatStreamText},
		{"chat json_schema, tool model after the result", "/v1/chat/completions",
			`"model":"mock-tool","messages":[{"role":"user","content":` + user + `},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"sunny"}],"response_format":{"type":"json_schema","json_schema":{"name":"recipe","schema":` + recipeSchema + `}}`,
			recipeSchema, chatText, chatStreamText},
		{"responses json_schema", "/v1/responses",
			`"model":"gpt-4o-mini","input":` + user + `,"text":{"format":{"type":"json_schema","name":"recipe","strict":true,"schema":` + recipeSchema + `}}`,
			recipeSchema, responsesText, responsesStreamText},
		{"messages output_config", "/v1/messages",
			`"model":"claude-sonnet-5-5","max_tokens":256,"messages":[{"role":"user","content":` + user + `}],"output_config":{"format":{"type":"json_schema","schema":` + recipeSchema + `}}`,
			recipeSchema, messagesText, messagesStreamText},
		{"messages output_format beta", "/v1/messages",
			`"model":"claude-sonnet-5-5","max_tokens":256,"messages":[{"role":"user","content":` + user + `}],"output_format":{"type":"json_schema","schema":` + recipeSchema + `}`,
			recipeSchema, messagesText, messagesStreamText},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := post(t, ts, tt.path, "{"+tt.body+"}")
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			plain, _ := tt.plain(t, b)
			mustValidate(t, tt.schema, plain)
			resp, events, err := postStream(t, ts, tt.path, `{"stream":true,`+tt.body+"}")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream: %d, %v", resp.StatusCode, err)
			}
			if streamed, _ := tt.stream(t, events); streamed != plain {
				t.Errorf("streamed %s; plain %s", streamed, plain)
			}
		})
	}

	// The Responses answer names the format it followed.
	_, _, b := post(t, ts, "/v1/responses", `{"model":"gpt-4o-mini","input":"x","text":{"format":{"type":"json_schema","name":"recipe","schema":`+recipeSchema+`}}}`)
	var r struct {
		Text struct {
			Format struct{ Type, Name string } `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(b, &r); err != nil || r.Text.Format.Type != "json_schema" || r.Text.Format.Name != "recipe" {
		t.Errorf("response text.format = %+v; want the request's json_schema", r.Text.Format)
	}
}

// toolArgs reads the one tool call's arguments of a plain answer on each
// API, and of a stream (the fragments joined).
func toolArgs(t *testing.T, path string, b []byte) string {
	t.Helper()
	var v struct {
		Choices []struct {
			Message struct {
				ToolCalls []struct {
					Function struct{ Arguments string } `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
		} `json:"choices"`
		Output []struct {
			Arguments string `json:"arguments"`
		} `json:"output"`
		Content []struct {
			Input json.RawMessage `json:"input"`
		} `json:"content"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	switch {
	case len(v.Choices) == 1 && len(v.Choices[0].Message.ToolCalls) == 1:
		return v.Choices[0].Message.ToolCalls[0].Function.Arguments
	case len(v.Output) == 1 && v.Output[0].Arguments != "":
		return v.Output[0].Arguments
	case len(v.Content) == 1 && len(v.Content[0].Input) > 0:
		return string(v.Content[0].Input)
	}
	t.Fatalf("%s: no tool call in %s", path, b)
	return ""
}

func streamedToolArgs(t *testing.T, events []string) string {
	t.Helper()
	var args strings.Builder
	for _, e := range events {
		if e == "[DONE]" {
			continue
		}
		var ev struct {
			Type    string `json:"type"`
			Delta   json.RawMessage
			Choices []struct {
				Delta struct {
					ToolCalls []struct {
						Function struct{ Arguments string } `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(e), &ev); err != nil {
			t.Fatal(err)
		}
		for _, c := range ev.Choices {
			for _, tc := range c.Delta.ToolCalls {
				args.WriteString(tc.Function.Arguments)
			}
		}
		switch ev.Type {
		case "response.function_call_arguments.delta":
			var s string
			_ = json.Unmarshal(ev.Delta, &s)
			args.WriteString(s)
		case "content_block_delta":
			var d struct {
				PartialJSON string `json:"partial_json"`
			}
			_ = json.Unmarshal(ev.Delta, &d)
			args.WriteString(d.PartialJSON)
		}
	}
	return args.String()
}

// TestToolArgumentsFollowSchema: a typed tool's call carries arguments
// that validate against the tool's input schema on every API, streamed
// and not; a tool whose schema names no property gets {"input": ...}.
func TestToolArgumentsFollowSchema(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 5})
	weather := `{"type":"object","properties":{"city":{"type":"string","minLength":2},"unit":{"enum":["c","f"]},"days":{"type":"integer","minimum":1,"maximum":7}},"required":["city","unit","days"],"additionalProperties":false}`
	msgs := `"messages":[{"role":"user","content":"weather in Paris"}]`
	tests := []struct{ name, path, body, schema string }{
		{"chat", "/v1/chat/completions", `"model":"mock-tool",` + msgs + `,"tools":[{"type":"function","function":{"name":"get_weather","parameters":` + weather + `}}]`, weather},
		{"chat recipe", "/v1/chat/completions", `"model":"mock-tool",` + msgs + `,"tools":[{"type":"function","function":{"name":"save","strict":true,"parameters":` + recipeSchema + `}}]`, recipeSchema},
		{"responses", "/v1/responses", `"model":"gpt-4o-tool","input":"weather in Paris","tools":[{"type":"function","name":"get_weather","parameters":` + weather + `}]`, weather},
		{"messages", "/v1/messages", `"model":"claude-sonnet-5-5-tool","max_tokens":256,` + msgs + `,"tools":[{"name":"get_weather","input_schema":` + weather + `}]`, weather},
		{"untyped", "/v1/messages", `"model":"claude-sonnet-5-5-tool","max_tokens":256,` + msgs + `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`,
			`{"type":"object","properties":{"input":{"const":"weather in Paris"}},"required":["input"],"additionalProperties":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, b := post(t, ts, tt.path, "{"+tt.body+"}")
			if status != 200 {
				t.Fatalf("status %d: %s", status, b)
			}
			args := toolArgs(t, tt.path, b)
			mustValidate(t, tt.schema, args)
			resp, events, err := postStream(t, ts, tt.path, `{"stream":true,`+tt.body+"}")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("stream: %d, %v", resp.StatusCode, err)
			}
			if s := streamedToolArgs(t, events); s != args {
				t.Errorf("streamed arguments %s; plain %s", s, args)
			}
		})
	}
}
