package mockllm_test

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/objects/objectstest"
)

// TestResponsesWithOfficialSDK checks the mock's Responses API against
// the official openai-go client: a plain answer, a stream the SDK's event
// union decodes with increasing sequence numbers and no [DONE], the same
// id and text both ways, and an injected failure as the SDK's error.
func TestResponsesWithOfficialSDK(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 3})
	c := objectstest.SDK(ts.URL, "sk-test")
	ctx := testContext(t)
	params := responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("hello there")}}

	r, err := c.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if r.OutputText() != "mock reply to: hello there" || r.Status != "completed" || r.Usage.OutputTokens != 5 || !strings.HasPrefix(r.ID, "resp_") {
		t.Fatalf("Responses.New = %q status %q usage %+v id %q", r.OutputText(), r.Status, r.Usage, r.ID)
	}

	st := c.Responses.NewStreaming(ctx, params)
	var types []string
	var deltas strings.Builder
	var final responses.Response
	seq := int64(-1)
	for st.Next() {
		ev := st.Current()
		types = append(types, ev.Type)
		if ev.SequenceNumber != seq+1 {
			t.Errorf("event %s has sequence_number %d after %d", ev.Type, ev.SequenceNumber, seq)
		}
		seq = ev.SequenceNumber
		switch ev.Type {
		case "response.output_text.delta":
			deltas.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatal(err)
	}
	if types[0] != "response.created" || types[len(types)-1] != "response.completed" {
		t.Errorf("event types = %v", types)
	}
	if deltas.String() != r.OutputText() || final.OutputText() != r.OutputText() || final.ID != r.ID {
		t.Errorf("stream text %q / %q id %q; want the plain answer's %q id %q", deltas.String(), final.OutputText(), final.ID, r.OutputText(), r.ID)
	}

	_, err = c.Responses.New(ctx, responses.ResponseNewParams{Model: "mock-404", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("x")}})
	var apiErr *officialopenai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound {
		t.Errorf("mock-404 = %v; want the SDK's 404 error", err)
	}
}

// TestResponsesStreamCut: a cut stream ends without response.completed.
func TestResponsesStreamCut(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{StreamChunks: 4})
	resp, err := http.Post(ts.URL+"/v1/responses", "application/json", strings.NewReader(`{"model":"mock-cut","input":"a b c d e f","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), "event: response.created") || strings.Contains(string(b), "response.completed") {
		t.Errorf("cut stream = %s", b)
	}
}
