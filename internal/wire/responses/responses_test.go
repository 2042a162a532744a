package responses

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/packages/ssestream"
	oresponses "github.com/openai/openai-go/v3/responses"

	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/wiretest"
)

// stored is a response with several output items of every kind Replay
// treats specially, plus one it does not know.
const stored = `{"id":"resp_1","object":"response","created_at":1,"status":"completed","model":"gpt-4o-mini",
"output":[
 {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"thinking about it"}]},
 {"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[
   {"type":"output_text","text":"Hello, ` + "\u00e9" + `world","annotations":[]},
   {"type":"refusal","refusal":"no more"}]},
 {"type":"function_call","id":"fc_1","call_id":"call_1","name":"lookup","arguments":"{\"q\":\"x\"}","status":"completed"},
 {"type":"image_generation_call","id":"ig_1","status":"completed","result":"AAAA"}
],
"usage":{"input_tokens":7,"output_tokens":9,"total_tokens":16}}`

// sdkStream decodes events with the official SDK's SSE decoder and event union.
func sdkStream(t *testing.T, events [][]byte) []oresponses.ResponseStreamEventUnion {
	t.Helper()
	st := ssestream.NewStream[oresponses.ResponseStreamEventUnion](ssestream.NewDecoder(wiretest.EventStream(events)), nil)
	var out []oresponses.ResponseStreamEventUnion
	for st.Next() {
		out = append(out, st.Current())
	}
	if err := st.Err(); err != nil {
		t.Fatalf("the SDK refused the stream: %v", err)
	}
	return out
}

func TestReplayIsAStreamTheSDKAccepts(t *testing.T) {
	events, err := Replay([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	got := sdkStream(t, events)
	var text, refusal, args, summary strings.Builder
	for i, ev := range got {
		if ev.SequenceNumber != int64(i) {
			t.Fatalf("event %d (%s) has sequence_number %d", i, ev.Type, ev.SequenceNumber)
		}
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.refusal.delta":
			refusal.WriteString(ev.Delta)
		case "response.function_call_arguments.delta":
			args.WriteString(ev.Delta)
		case "response.reasoning_summary_text.delta":
			summary.WriteString(ev.Delta)
		}
	}
	if got[0].Type != "response.created" || got[0].Response.Status != "in_progress" || len(got[0].Response.Output) != 0 {
		t.Errorf("first event %s status %q", got[0].Type, got[0].Response.Status)
	}
	last := got[len(got)-1]
	if last.Type != "response.completed" || last.Response.ID != "resp_1" || last.Response.Usage.OutputTokens != 9 || len(last.Response.Output) != 4 {
		t.Errorf("last event %s %+v", last.Type, last.Response)
	}
	if text.String() != "Hello, éworld" || refusal.String() != "no more" || args.String() != `{"q":"x"}` || summary.String() != "thinking about it" {
		t.Errorf("deltas: text %q refusal %q args %q summary %q", text.String(), refusal.String(), args.String(), summary.String())
	}
	// The replayed stream assembles back into the stored response.
	body, u, err := wiretest.Assemble(Format{}, Path, events)
	var want bytes.Buffer
	_ = json.Compact(&want, []byte(stored))
	if err != nil || string(body) != want.String() || u.Prompt != 7 || u.Completion != 9 || !u.Known {
		t.Errorf("assembled %s %+v %v", body, u, err)
	}
}

func TestReplayCutsLongText(t *testing.T) {
	long := strings.Repeat("é", 3*maxPiece)
	body := `{"id":"r","object":"response","status":"completed","output":[{"type":"message","id":"m","role":"assistant","status":"completed","content":[{"type":"output_text","text":"` + long + `","annotations":[]}]}]}`
	events, err := Replay([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, ev := range sdkStream(t, events) {
		if ev.Type == "response.output_text.delta" {
			if len(ev.Delta) > maxPiece {
				t.Fatalf("a delta of %d bytes", len(ev.Delta))
			}
			text.WriteString(ev.Delta)
		}
	}
	if text.String() != long {
		t.Error("long text did not survive the cut")
	}
}

func TestAssembler(t *testing.T) {
	completed := `event: response.completed
data: {"type":"response.completed","sequence_number":9,"response":{"id":"resp_2","object":"response","status":"completed","output":[{"type":"message","id":"m2"},{"type":"function_call","id":"f2","arguments":"{}"}],"usage":{"input_tokens":1,"output_tokens":2}}}

`
	tests := []struct {
		name   string
		events []string
		want   string // "" = not storable
	}{
		{"completed after items out of order and unknown events", []string{
			"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_2\"}}\n\n",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":1}\n\n",
			"event: response.output_item.added\ndata: {\"type\":\"response.output_item.added\",\"output_index\":0}\n\n",
			"event: response.some_future_event\ndata: {\"type\":\"response.some_future_event\"}\n\n",
			"event: response.refusal.delta\ndata: {\"type\":\"response.refusal.delta\",\"delta\":\"x\"}\n\n",
			"event: response.reasoning_summary_text.delta\ndata: {\"type\":\"response.reasoning_summary_text.delta\",\"delta\":\"y\"}\n\n",
			completed,
		}, `{"id":"resp_2","object":"response","status":"completed","output":[{"type":"message","id":"m2"},{"type":"function_call","id":"f2","arguments":"{}"}],"usage":{"input_tokens":1,"output_tokens":2}}`},
		{"data-only events", []string{"data: " + strings.Split(completed, "data: ")[1]}, `{"id":"resp_2","object":"response","status":"completed","output":[{"type":"message","id":"m2"},{"type":"function_call","id":"f2","arguments":"{}"}],"usage":{"input_tokens":1,"output_tokens":2}}`},
		{"failed", []string{"event: response.failed\ndata: {\"type\":\"response.failed\",\"response\":{\"id\":\"r\",\"status\":\"failed\"}}\n\n"}, ""},
		{"incomplete", []string{"event: response.incomplete\ndata: {\"type\":\"response.incomplete\",\"response\":{\"id\":\"r\"}}\n\n"}, ""},
		{"error event", []string{"event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\"}\n\n", completed}, ""},
		{"cut before the end", []string{"event: response.created\ndata: {\"type\":\"response.created\"}\n\n"}, ""},
		{"completed without a response", []string{"event: response.completed\ndata: {\"type\":\"response.completed\"}\n\n"}, ""},
	}
	for _, tt := range tests {
		body, _, err := wiretest.Assemble(Format{}, Path, tt.events)
		if tt.want == "" {
			if !errors.Is(err, ErrIncomplete) {
				t.Errorf("%s: stored %s", tt.name, body)
			}
			continue
		}
		if err != nil || string(body) != tt.want {
			t.Errorf("%s: %s, %v", tt.name, body, err)
		}
	}
}

// FuzzAssembler: any events, in any order, never panic, and the stored
// body is always the response of a response.completed event.
func FuzzAssembler(f *testing.F) {
	f.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":{\"id\":\"x\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"error\"}\n\nevent: response.completed\ndata: {}\n\n"))
	f.Fuzz(func(t *testing.T, stream []byte) {
		a := Format{}.NewAssembler(Path)
		for ev := range bytes.SplitAfterSeq(stream, []byte("\n\n")) {
			a.Add(ev)
		}
		body, _, err := a.Finish()
		if err == nil && (len(body) == 0 || body[0] != '{' || !bytes.Contains(stream, body)) {
			t.Fatalf("stored %q from %q", body, stream)
		}
	})
}

func TestParse(t *testing.T) {
	f := Format{}
	key := func(body string) string {
		t.Helper()
		fx, err := f.Parse("t", Path, []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return fx.Hash
	}
	base := `{"model":"m","input":"hi"}`
	if key(base) != key(`{"model":"m","input":"hi","stream":true,"user":"u","metadata":{"a":"b"}}`) {
		t.Error("stream, user or metadata changed the key")
	}
	if key(base) != key(`{"model":"m","input":"hi","prompt_cache_key":"019a-thread","safety_identifier":"u-hash"}`) {
		t.Error("prompt_cache_key or safety_identifier changed the key")
	}
	for _, other := range []string{`{"model":"m","input":"hi","store":false}`, `{"model":"m","input":"hi","previous_response_id":"resp_1"}`} {
		if key(base) == key(other) {
			t.Errorf("%s shares the key of %s", other, base)
		}
	}
	if key(base) != key(`{"model":"m","input":"hi","client_metadata":{"session_id":"019a","turn_started_at_unix_ms":"1796161077228"}}`) {
		t.Error("client_metadata changed the key")
	}
	unstored := `{"model":"m","store":false,"input":[{"type":"message","id":"msg_1","role":"user","content":[{"type":"input_text","text":"hi"}]},` +
		`{"type":"function_call","id":"fc_1","call_id":"call_1","name":"f","arguments":"{}"},{"type":"function_call_output","id":"fco_1","call_id":"call_1","output":"ok"},` +
		`{"type":"custom_tool_call","id":"ctc_1","call_id":"call_2","name":"g","input":"x"},{"type":"custom_tool_call_output","id":"ctco_1","call_id":"call_2","output":"ok"}]}`
	idTests := []struct {
		name     string
		a, b     string
		wantSame bool
	}{
		{"unstored item ids", unstored, strings.NewReplacer(`"msg_1"`, `"msg_9"`, `"fc_1"`, `"fc_9"`, `"fco_1"`, `"fco_9"`, `"ctc_1"`, `"ctc_9"`, `"ctco_1"`, `"ctco_9"`).Replace(unstored), true},
		{"call ids", unstored, strings.ReplaceAll(unstored, `"call_1"`, `"call_9"`), false},
		{"stored item ids", strings.Replace(unstored, `"store":false,`, ``, 1), strings.Replace(strings.ReplaceAll(unstored, `"msg_1"`, `"msg_9"`), `"store":false,`, ``, 1), false},
		{"store true item ids", strings.Replace(unstored, `false`, `true`, 1), strings.Replace(strings.ReplaceAll(unstored, `"msg_1"`, `"msg_9"`), `false`, `true`, 1), false},
		{"item_reference", `{"model":"m","store":false,"input":[{"type":"item_reference","id":"msg_1"}]}`, `{"model":"m","store":false,"input":[{"type":"item_reference","id":"msg_9"}]}`, false},
		{"untyped item", `{"model":"m","store":false,"input":[{"id":"msg_1"}]}`, `{"model":"m","store":false,"input":[{"id":"msg_9"}]}`, false},
		{"reasoning", `{"model":"m","store":false,"input":[{"type":"reasoning","id":"rs_1","summary":[]}]}`, `{"model":"m","store":false,"input":[{"type":"reasoning","id":"rs_9","summary":[]}]}`, false},
	}
	for _, tt := range idTests {
		if same := key(tt.a) == key(tt.b); same != tt.wantSame {
			t.Errorf("%s: same key %v; want %v\n%s\n%s", tt.name, same, tt.wantSame, tt.a, tt.b)
		}
	}
	tests := []struct {
		body, bypass string
		estimate     int
	}{
		{`{"model":"m","input":"hi"}`, "", (26+3)/4 + 256},
		{`{"model":"m","input":"hi","max_output_tokens":50}`, "", (49+3)/4 + 50},
		{`{"model":"m","input":"hi","background":true}`, "background", 0},
		{`{"model":"m","input":"hi","conversation":"conv_1"}`, "conversation", 0},
		{`{"model":"m","input":"hi","conversation":null}`, "", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"custom","name":"c"}]}`, "", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"function","name":"f"},{"type":"web_search"}]}`, "hosted tool web_search", 0},
		{`{"model":"m","input":"hi","tools":"nope"}`, "unreadable fields", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"mcp__fs","tools":[{"type":"function","name":"read"},{"type":"custom","name":"c"}]}]}`, "", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"ns","tools":[{"type":"file_search"}]}]}`, "hosted tool file_search", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"namespace","name":"ns"},{"type":"code_interpreter"}]}`, "hosted tool code_interpreter", 0},
		{`{"model":"m","input":"hi","tools":[{"type":"mcp","server_label":"x"}]}`, "hosted tool mcp", 0},
		{`{"model":"m","input":"hi","tools":[{"name":"untyped"}]}`, "tool without a type", 0},
	}
	for _, tt := range tests {
		fx, err := f.Parse("t", Path, []byte(tt.body))
		if err != nil {
			t.Fatal(err)
		}
		if fx.Bypass != tt.bypass || (tt.estimate != 0 && fx.Estimate != tt.estimate) || fx.Model != "m" {
			t.Errorf("%s: bypass %q estimate %d model %q; want %q %d", tt.body, fx.Bypass, fx.Estimate, fx.Model, tt.bypass, tt.estimate)
		}
	}
}

func TestErrorEvent(t *testing.T) {
	f := Format{}
	got := string(f.ErrorEvent(wire.Error{Status: 502, Type: "server_error", Code: "upstream_error", Message: "cut"}, 12))
	want := "event: error\ndata: {\"type\":\"error\",\"code\":\"upstream_error\",\"message\":\"cut\",\"param\":null,\"sequence_number\":12}\n\n"
	if got != want {
		t.Errorf("ErrorEvent = %q; want %q", got, want)
	}
	if !f.IsEnd([]byte(got)) {
		t.Error("the error event does not end the stream")
	}
}

// TestCutReplayEndsWithTheNextSequenceNumber: a replay cut after any
// number of its events, ended by the error event numbered with
// wire.NextSequence, is a stream the official SDK decodes, whose error
// event (every field of ResponseErrorEvent present) takes the number
// after the last event the client got.
func TestCutReplayEndsWithTheNextSequenceNumber(t *testing.T) {
	f := Format{}
	events, err := Replay([]byte(stored))
	if err != nil {
		t.Fatal(err)
	}
	for cut := range len(events) {
		var next int64
		sent := append([][]byte(nil), events[:cut]...)
		for _, ev := range sent {
			next = wire.NextSequence(f, next, ev)
		}
		sent = append(sent, f.ErrorEvent(wire.Error{Status: 502, Code: "upstream_error", Message: "cut"}, next))
		got := sdkStream(t, sent)
		last := got[len(got)-1]
		if last.Type != "error" {
			t.Fatalf("cut at %d: last event %q", cut, last.Type)
		}
		e := last.AsError()
		if e.SequenceNumber != int64(cut) || !e.JSON.SequenceNumber.Valid() || e.Code != "upstream_error" || e.Message != "cut" {
			t.Fatalf("cut at %d: error event %+v (raw %s)", cut, e, e.RawJSON())
		}
		var raw map[string]json.RawMessage
		if err := json.Unmarshal([]byte(e.RawJSON()), &raw); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"type", "code", "message", "param", "sequence_number"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("cut at %d: the error event has no %s", cut, k)
			}
		}
	}
}

func TestSequence(t *testing.T) {
	tests := []struct {
		give   string
		want   int64
		wantOK bool
	}{
		{"event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{}}\n\n", 0, true},
		{"event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\" : 41,\"delta\":\"x\"}\n\n", 41, true},
		{"data: {\"delta\":\"says \\\"sequence_number\\\":9\",\"sequence_number\":3}\n\n", 3, true},
		{"data: {\"response\":{},\"sequence_number\":1234567}\n\n", 1234567, true},
		{"event: ping\ndata: {}\n\n", 0, false},
		{"data: {\"sequence_number\":null}\n\n", 0, false},
		{"data: {\"sequence_number\":99999999999999999999}\n\n", 0, false},
	}
	for _, tt := range tests {
		got, ok := Format{}.Sequence([]byte(tt.give))
		if got != tt.want || ok != tt.wantOK {
			t.Errorf("Sequence(%q) = %d, %v; want %d, %v", tt.give, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestAnswer(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{stored, true},
		{`{"id":"resp_1","object":"response","output":[],"error":null}`, true},
		{`{"id":"resp_1","object":"response","status":"failed","output":[],"error":{"code":"server_error","message":"x"}}`, false},
		{`{"error":{"message":"boom","type":"server_error"}}`, false},
		{`{"id":"resp_1","object":"chat.completion","output":[]}`, false},
		{`{"id":"resp_1","object":"response"}`, false},
	}
	for _, tt := range tests {
		if got := (Format{}).Answer(Path, []byte(tt.give)); got != tt.want {
			t.Errorf("Answer(%s) = %v; want %v", tt.give, got, tt.want)
		}
	}
}
