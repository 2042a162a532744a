package responses

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/wire"
)

func TestUsageReadsCachedTokensAndModel(t *testing.T) {
	body := `{"id":"resp_1","object":"response","model":"gpt-4o-2024-08-06","status":"completed","output":[],"usage":{"input_tokens":500,"input_tokens_details":{"cached_tokens":128},"output_tokens":40,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":540}}`
	want := wire.Usage{Prompt: 500, Completion: 40, Cached: 128, Model: "gpt-4o-2024-08-06", Known: true}
	if diff := cmp.Diff(want, Format{}.Usage([]byte(body))); diff != "" {
		t.Errorf("Usage (-want +got):\n%s", diff)
	}
	a := Format{}.NewAssembler("/v1/responses")
	a.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + body + "}\n\n"))
	_, u, err := a.Finish()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, u); diff != "" {
		t.Errorf("streamed Usage (-want +got):\n%s", diff)
	}
}

// TestUnbelievableUsageIsUnread: a response whose usage has a figure that
// cannot be true, or lacks input_tokens or output_tokens, has unread
// usage, whole or streamed.
func TestUnbelievableUsageIsUnread(t *testing.T) {
	for _, usage := range []string{
		`{"input_tokens":-500,"output_tokens":40,"total_tokens":-460}`,
		`{"input_tokens":500.5,"output_tokens":40,"total_tokens":540}`,
		`{"input_tokens":"500","output_tokens":"40","total_tokens":"540"}`,
		`{"input_tokens":9223372036854775807,"output_tokens":40,"total_tokens":9223372036854775807}`,
		`{"input_tokens":500,"input_tokens_details":{"cached_tokens":501},"output_tokens":40}`,
		`{"input_tokens":500}`,
		`{"output_tokens":40}`,
	} {
		body := `{"id":"resp_1","object":"response","model":"m","status":"completed","output":[],"usage":` + usage + `}`
		if u := (Format{}).Usage([]byte(body)); u != (wire.Usage{}) {
			t.Errorf("%s: Usage = %+v; want unread", usage, u)
		}
		a := Format{}.NewAssembler("/v1/responses")
		a.Add([]byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"response\":" + body + "}\n\n"))
		if _, u, err := a.Finish(); err != nil || u != (wire.Usage{}) {
			t.Errorf("%s streamed: %+v, %v; want unread usage, no error", usage, u, err)
		}
	}
}
