package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/packages/ssestream"

	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/wiretest"
)

const stored = `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5",
"content":[
 {"type":"thinking","thinking":"let me think","signature":"sig-abc"},
 {"type":"text","text":"Here you go: ` + "\u00e9" + `"},
 {"type":"tool_use","id":"toolu_1","name":"lookup","input":{"q":"x","n":2}},
 {"type":"redacted_thinking","data":"opaque"}
],
"stop_reason":"tool_use","stop_sequence":null,
"usage":{"input_tokens":10,"output_tokens":20,"cache_creation_input_tokens":3,"cache_read_input_tokens":4}}`

// accumulate runs events through the official SDK's decoder and Message
// accumulator.
func accumulate(t *testing.T, events [][]byte) sdk.Message {
	t.Helper()
	st := ssestream.NewStream[sdk.MessageStreamEventUnion](ssestream.NewDecoder(wiretest.EventStream(events)), nil)
	var m sdk.Message
	for st.Next() {
		if err := m.Accumulate(st.Current()); err != nil {
			t.Fatalf("accumulate: %v", err)
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the SDK refused the stream: %v", err)
	}
	return m
}

func TestReplayAccumulatesToTheStoredMessage(t *testing.T) {
	events, err := Replay([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	m := accumulate(t, events)
	if m.ID != "msg_1" || len(m.Content) != 4 || m.StopReason != "tool_use" {
		t.Fatalf("accumulated %+v", m)
	}
	if m.Content[0].Thinking != "let me think" || m.Content[0].Signature != "sig-abc" || m.Content[1].Text != "Here you go: é" {
		t.Errorf("thinking/text: %+v %+v", m.Content[0], m.Content[1])
	}
	var in map[string]any
	if err := json.Unmarshal(m.Content[2].Input, &in); err != nil || in["q"] != "x" || m.Content[2].Name != "lookup" {
		t.Errorf("tool_use input %s (%v)", m.Content[2].Input, err)
	}
	if m.Usage.InputTokens != 10 || m.Usage.OutputTokens != 20 || m.Usage.CacheReadInputTokens != 4 || m.Usage.CacheCreationInputTokens != 3 {
		t.Errorf("usage %+v", m.Usage)
	}
	// And Corral's own assembler turns the replay back into the same message.
	body, u, err := wiretest.Assemble(Format{}, Path, events)
	if err != nil {
		t.Fatal(err)
	}
	if !sameJSON(t, body, []byte(stored)) || u.Prompt != 17 || u.Completion != 20 {
		t.Errorf("assembled %s usage %+v", body, u)
	}
}

func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return bytes.Equal(xa, ya)
}

func ev(typ, data string) string { return "event: " + typ + "\ndata: " + data + "\n\n" }

func TestAssembler(t *testing.T) {
	start := ev("message_start", `{"type":"message_start","message":{"id":"m","type":"message","role":"assistant","model":"c","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":1,"cache_read_input_tokens":2}}}`)
	stop := ev("message_stop", `{"type":"message_stop"}`)
	delta := ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":7}}`)
	tests := []struct {
		name   string
		events []string
		want   string // "" = not storable
	}{
		{"text in pieces, a ping and an unknown event", []string{start,
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`),
			ev("ping", `{"type":"ping"}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}`),
			ev("future_event", `{"type":"future_event"}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"lo"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`), delta, stop},
			`{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"Hello"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":2}}`},
		{"tool use from input_json_delta, several blocks", []string{start,
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"thinking","thinking":"","signature":""}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"thinking_delta","thinking":"hmm"}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"signature_delta","signature":"s1"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("content_block_start", `{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"1}"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":1}`),
			ev("content_block_start", `{"type":"content_block_start","index":2,"content_block":{"type":"some_new_block","x":1}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":2}`), delta, stop},
			`{"id":"m","type":"message","role":"assistant","model":"c","content":[{"type":"thinking","thinking":"hmm","signature":"s1"},{"type":"tool_use","id":"t","name":"f","input":{"a":1}},{"type":"some_new_block","x":1}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":5,"output_tokens":7,"cache_read_input_tokens":2}}`},
		{"error event", []string{start, ev("error", `{"type":"error","error":{"type":"overloaded_error","message":"x"}}`)}, ""},
		{"cut before message_stop", []string{start, delta}, ""},
		{"block never stopped", []string{start, ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), delta, stop}, ""},
		{"block out of order", []string{start, ev("content_block_start", `{"type":"content_block_start","index":3,"content_block":{"type":"text","text":""}}`), stop}, ""},
		{"broken tool input", []string{start,
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"t","name":"f","input":{}}}`),
			ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{\"a\":"}}`),
			ev("content_block_stop", `{"type":"content_block_stop","index":0}`), delta, stop}, ""},
	}
	for _, tt := range tests {
		body, _, err := wiretest.Assemble(Format{}, Path, tt.events)
		if tt.want == "" {
			if err == nil {
				t.Errorf("%s: stored %s", tt.name, body)
			}
			continue
		}
		if err != nil || !sameJSON(t, body, []byte(tt.want)) {
			t.Errorf("%s: %s, %v\nwant %s", tt.name, body, err, tt.want)
		}
	}
}

func FuzzAssembler(f *testing.F) {
	f.Add([]byte(ev("message_start", `{"message":{"id":"m"}}`) + ev("message_stop", `{}`)))
	f.Add([]byte(ev("content_block_delta", `{"index":0,"delta":{"type":"text_delta","text":"x"}}`)))
	f.Fuzz(func(t *testing.T, stream []byte) {
		a := Format{}.NewAssembler(Path)
		for e := range bytes.SplitAfterSeq(stream, []byte("\n\n")) {
			a.Add(e)
		}
		if body, _, err := a.Finish(); err == nil && !json.Valid(body) {
			t.Fatalf("stored invalid JSON %q", body)
		}
	})
}

func TestErrorShapes(t *testing.T) {
	f := Format{}
	tests := []struct {
		status int
		want   string
	}{
		{401, "authentication_error"}, {403, "permission_error"}, {404, "not_found_error"}, {400, "invalid_request_error"},
		{413, "request_too_large"}, {429, "rate_limit_error"}, {500, "api_error"}, {502, "api_error"}, {504, "timeout_error"}, {529, "overloaded_error"},
	}
	for _, tt := range tests {
		got := string(f.ErrorBody(wire.Error{Status: tt.status, Type: "x", Code: "y", Message: "m"}))
		if want := `{"type":"error","error":{"type":"` + tt.want + `","message":"m"}}`; got != want {
			t.Errorf("%d: %s; want %s", tt.status, got, want)
		}
	}
	if got := string(f.ErrorEvent(wire.Error{Status: 502, Message: "cut"}, 7)); got != "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"cut\"}}\n\n" || !f.IsEnd([]byte(got)) {
		t.Errorf("ErrorEvent = %q", got)
	}
	if !errors.Is(ErrIncomplete, ErrIncomplete) || !strings.Contains(ErrIncomplete.Error(), "message_stop") {
		t.Error("ErrIncomplete")
	}
}

func TestParse(t *testing.T) {
	f := Format{}
	a, _ := f.Parse("t", Path, []byte(`{"model":"c","max_tokens":100,"messages":[{"role":"user","content":"hi"}]}`))
	b, _ := f.Parse("t", Path, []byte(`{"model":"c","max_tokens":100,"messages":[{"role":"user","content":"hi"}],"stream":true,"metadata":{"user_id":"u"}}`))
	c, _ := f.Parse("t", Path, []byte(`{"model":"c","max_tokens":101,"messages":[{"role":"user","content":"hi"}]}`))
	if a.Hash != b.Hash || a.Hash == c.Hash || !b.Stream || a.Model != "c" {
		t.Errorf("keys: %v %v %v", a, b, c)
	}
	if a.Estimate != (73+3)/4+100 {
		t.Errorf("estimate %d", a.Estimate)
	}
}

func TestParseBypass(t *testing.T) {
	const head = `{"model":"c","max_tokens":10,"messages":[{"role":"user","content":"hi"}]`
	tests := []struct{ give, want string }{
		{head + `}`, ""},
		{head + `,"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]}`, ""},
		{head + `,"tools":[{"type":"custom","name":"f","input_schema":{"type":"object"}}]}`, ""},
		{head + `,"tools":[{"type":"bash_20250124","name":"bash"}]}`, ""},
		{head + `,"tools":[{"type":"text_editor_20250728","name":"str_replace_based_edit_tool"}]}`, ""},
		{head + `,"tools":[{"type":"computer_20250124","name":"computer","display_width_px":1024,"display_height_px":768}]}`, ""},
		{head + `,"tools":[{"type":"memory_20250818","name":"memory"}]}`, ""},
		{head + `,"tools":[{"name":"f","input_schema":{}},{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, "server tool web_search_20250305"},
		{head + `,"tools":[{"type":"web_fetch_20250910","name":"web_fetch"}]}`, "server tool web_fetch_20250910"},
		{head + `,"tools":[{"type":"code_execution_20250825","name":"code_execution"}]}`, "server tool code_execution_20250825"},
		{head + `,"tools":[{"type":"tool_search_tool_regex_20251119","name":"tool_search_tool_regex"}]}`, "server tool tool_search_tool_regex_20251119"},
		{head + `,"tools":[{"type":"mcp_toolset","mcp_server_name":"x"}]}`, "server tool mcp_toolset"},
		{head + `,"tools":[{"type":"some_future_tool_20270101","name":"x"}]}`, "server tool some_future_tool_20270101"},
		{head + `,"mcp_servers":[{"type":"url","url":"https://mcp.example.com/sse","name":"x"}]}`, "mcp_servers"},
		{head + `,"mcp_servers":[]}`, ""},
		{head + `,"mcp_servers":null,"container":null}`, ""},
		{head + `,"container":"container_011CPR5CNjB747bTd36fQLFk"}`, "container"},
		{head + `,"tools":{"type":"web_search_20250305"}}`, "unreadable fields"},
	}
	for _, tt := range tests {
		fx, err := Format{}.Parse("t", Path, []byte(tt.give))
		if err != nil {
			t.Fatalf("%s: %v", tt.give, err)
		}
		if fx.Bypass != tt.want {
			t.Errorf("%s: bypass %q; want %q", tt.give, fx.Bypass, tt.want)
		}
	}
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{`{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"hi"}]}`, true},
		{`{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`, false},
		{`{"error":{"message":"boom"}}`, false},
		{`{"type":"message"}`, false},
	}
	for _, tt := range tests {
		if got := (Format{}).Answer("/messages", []byte(tt.give)); got != tt.want {
			t.Errorf("Answer(%s) = %v; want %v", tt.give, got, tt.want)
		}
	}
}
