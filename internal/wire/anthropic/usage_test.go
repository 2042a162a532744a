package anthropic

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/wire"
)

func TestUsageReadsCacheReadsWritesAndModel(t *testing.T) {
	body := `{"id":"msg_1","type":"message","role":"assistant","model":"claude-sonnet-4-5-20250929","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":50,"cache_creation_input_tokens":1000,"cache_read_input_tokens":2000,"output_tokens":300}}`
	want := wire.Usage{Prompt: 3050, Completion: 300, Cached: 2000, CacheWrite: 1000, Model: "claude-sonnet-4-5-20250929", Known: true}
	if diff := cmp.Diff(want, Format{}.Usage([]byte(body))); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	a := Format{}.NewAssembler("/v1/messages")
	for _, ev := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-sonnet-4-5-20250929\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":50,\"cache_creation_input_tokens\":1000,\"cache_read_input_tokens\":2000,\"output_tokens\":1}}}\n\n",
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":300}}\n\n",
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
	} {
		a.Add([]byte(ev))
	}
	_, u, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("streamed Usage (-want +got):\n%s", diff)
	}
}

// TestUnbelievableUsageIsUnread: a figure that cannot be true in a
// message's usage, or in either stream event that carries usage, leaves
// the usage unread; the stream still assembles.
func TestUnbelievableUsageIsUnread(t *testing.T) {
	const good = `{"input_tokens":50,"output_tokens":1}`
	for _, bad := range []string{
		`{"input_tokens":-50,"output_tokens":300}`,
		`{"input_tokens":50.5,"output_tokens":300}`,
		`{"input_tokens":"50","output_tokens":"300"}`,
		`{"input_tokens":9223372036854775807,"output_tokens":300}`,
		`{"input_tokens":1073741824,"cache_read_input_tokens":1073741824,"output_tokens":300}`,
	} {
		body := `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","stop_sequence":null,"usage":` + bad + `}`
		if u := (Format{}).Usage([]byte(body)); u != (wire.Usage{}) {
			t.Errorf("%s: Usage = %+v; want unread", bad, u)
		}
		for _, at := range []string{"start", "delta"} {
			start, delta := good, `{"output_tokens":300}`
			if at == "start" {
				start = bad
			} else {
				delta = bad
			}
			a := Format{}.NewAssembler("/v1/messages")
			for _, ev := range []string{
				"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":" + start + "}}\n\n",
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
				"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
				"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":" + delta + "}\n\n",
				"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
			} {
				a.Add([]byte(ev))
			}
			if _, u, err := a.Finish(); err != nil || u != (wire.Usage{}) {
				t.Errorf("%s in message_%s: %+v, %v; want unread usage, no error", bad, at, u, err)
			}
		}
	}
}
