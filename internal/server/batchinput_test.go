package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/objects/objectstest"
)

// newBatch creates a batch over a file of lines uploaded as key, and
// returns the SDK's error (nil when the batch was made).
func newBatch(t *testing.T, base, key, lines string) error {
	t.Helper()
	ctx := context.Background()
	c := objectstest.SDK(base, key)
	f, err := c.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(lines), "in.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1ChatCompletions, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h})
	return err
}

func statusOf(err error) int {
	var apiErr *officialopenai.Error
	if errors.As(err, &apiErr) {
		return apiErr.StatusCode
	}
	return 0
}

// TestBatchLinesModelsAreChecked: a batch line's body.model is a request
// the upstream runs: the allow-list and fine-tuned ownership hold for it
// as for a direct request, when the batch is created.
func TestBatchLinesModelsAreChecked(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	line := func(model string) string {
		return `{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}}` + "\n"
	}
	tests := []struct {
		name, key, lines string
		want             int
	}{
		{"a model the tenant may not use", limitedKey, line("gpt-4o-mini") + line("gpt-4o"), http.StatusForbidden},
		{"another tenant's fine-tuned model", betaKey, line("ft:gpt-4o-mini:acme-private::x"), http.StatusNotFound},
		{"allowed models", limitedKey, line("gpt-4o-mini") + line("gpt-4o-mini"), 0},
	}
	for _, tt := range tests {
		before := len(fake.CallsMentioning("POST /v1/batches"))
		err := newBatch(t, h.gw.URL, tt.key, tt.lines)
		if got := statusOf(err); got != tt.want || (tt.want == 0 && err != nil) {
			t.Errorf("%s: batch = %v; want status %d", tt.name, err, tt.want)
		}
		forwarded := len(fake.CallsMentioning("POST /v1/batches")) != before
		if forwarded != (tt.want == 0) {
			t.Errorf("%s: forwarded = %v", tt.name, forwarded)
		}
	}
}

// TestBatchesAreChargedTokensPerMinute: a batch's lines are charged at
// creation, each its bytes / 4 plus its max tokens, so a tenant cannot run
// past its tokens/min through batches.
func TestBatchesAreChargedTokensPerMinute(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, withObjectUpstream(fake, log), func(o *harnessOptions) {
		o.tenants = append(o.tenants, limitedTenant("tpm", "sk-tpm", 0, 1000))
	})
	line := `{"custom_id":"1","method":"POST","url":"/v1/chat/completions","body":{"model":"gpt-4o-mini","max_tokens":400,"messages":[{"role":"user","content":"hi"}]}}` + "\n"
	if err := newBatch(t, h.gw.URL, "sk-tpm", line+line); err != nil {
		t.Fatalf("first batch (about 900 of 1000 tokens): %v", err)
	}
	before := len(fake.CallsMentioning("POST /v1/batches"))
	if err := newBatch(t, h.gw.URL, "sk-tpm", line+line); statusOf(err) != http.StatusTooManyRequests {
		t.Errorf("second batch within the minute = %v; want 429", err)
	}
	if len(fake.CallsMentioning("POST /v1/batches")) != before {
		t.Error("the refused batch reached the upstream")
	}
}

// TestBatchInputIsBounded: Corral reads at most maxBatchInput of a
// batch's input file back; a larger one is refused with a 400 that says
// so, instead of being downloaded and scanned on every create.
func TestBatchInputIsBounded(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	// Blank lines: the cheapest content to scan, so the test is about
	// the size alone.
	big := strings.Repeat(strings.Repeat(" ", 1023)+"\n", maxBatchInput/1024+1)
	id := fake.DirectContent("big.jsonl", "batch", []byte(big))
	if err := h.srv.objects.Assign(context.Background(), id, objects.Owner{Tenant: "beta", Upstream: "default", Kind: "file"}); err != nil {
		t.Fatal(err)
	}
	before := len(fake.CallsMentioning("POST /v1/batches"))
	code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/batches", betaKey,
		`{"input_file_id":"`+id+`","endpoint":"/v1/chat/completions","completion_window":"24h"}`)
	if code != http.StatusBadRequest || !strings.Contains(body, "32 MiB") || !strings.Contains(body, `"input_file_id"`) {
		t.Errorf("batch over a %d-byte input file = %d %s; want 400 naming the cap", len(big), code, body)
	}
	if len(fake.CallsMentioning("POST /v1/batches")) != before {
		t.Error("the refused batch reached the upstream")
	}
}

// TestNestedModelsAreChecked: the models a request names below its top
// level (a Message Batch's requests, a realtime session, a grader) are
// allowed and owned like a top-level one.
func TestNestedModelsAreChecked(t *testing.T) {
	var forwarded atomic.Int32
	h := newHarness(t, withAnthropic, objectTenants, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			batches := fakeMessageBatches(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				forwarded.Add(1)
				batches.ServeHTTP(w, r)
			})
		}
	})
	ctx := context.Background()
	tests := []struct {
		name, path, key, body string
		want                  int
	}{
		{"message batch params.model", "/v1/messages/batches", limitedKey,
			`{"requests":[{"custom_id":"a","params":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}},` +
				`{"custom_id":"b","params":{"model":"claude-opus-4-1","max_tokens":5,"messages":[{"role":"user","content":"x"}]}}]}`, http.StatusForbidden},
		{"realtime client secret session.model", "/v1/realtime/client_secrets", limitedKey,
			`{"session":{"type":"realtime","model":"gpt-realtime"}}`, http.StatusForbidden},
		{"realtime transcription model", "/v1/realtime/transcription_sessions", limitedKey,
			`{"input_audio_transcription":{"model":"gpt-4o-transcribe"}}`, http.StatusForbidden},
		{"grader run of another tenant's fine-tuned model", "/v1/fine_tuning/alpha/graders/run", betaKey,
			`{"grader":{"type":"multi","graders":{"g":{"type":"score_model","name":"g","model":"ft:gpt-4o-mini:alpha-private::x","input":[]}}},"model_sample":"x"}`, http.StatusNotFound},
	}
	for _, tt := range tests {
		before := forwarded.Load()
		a := sendWith(ctx, h.gw.URL+tt.path, tt.body, "Authorization", "Bearer "+tt.key)
		if a.status != tt.want {
			t.Errorf("%s: %d %s; want %d", tt.name, a.status, a.body, tt.want)
		}
		if forwarded.Load() != before {
			t.Errorf("%s: forwarded", tt.name)
		}
	}
	// An allowed model still goes through.
	before := forwarded.Load()
	ok := `{"requests":[{"custom_id":"a","params":{"model":"gpt-4o-mini","max_tokens":5,"messages":[{"role":"user","content":"x"}]}}]}`
	if a := postMessages(ctx, h.gw.URL+"/v1/messages/batches", limitedKey, ok); a.status != http.StatusOK || forwarded.Load() == before {
		t.Errorf("message batch of allowed models = %d %s; want it forwarded", a.status, a.body)
	}
}

// TestMessageBatchesAreChargedTokensPerMinute: each request's params
// bytes / 4 plus its max_tokens is charged when the batch is created.
func TestMessageBatchesAreChargedTokensPerMinute(t *testing.T) {
	h := newHarness(t, withAnthropic, func(o *harnessOptions) {
		o.wrapUpstream = fakeMessageBatches
		o.tenants = append(o.tenants, limitedTenant("tpm", "sk-tpm", 0, 1000))
	})
	ctx := context.Background()
	body := func(n int) string {
		var reqs []string
		for i := range n {
			reqs = append(reqs, fmt.Sprintf(`{"custom_id":"%d","params":{"model":"claude-x","max_tokens":300,"messages":[{"role":"user","content":"x"}]}}`, i))
		}
		return `{"requests":[` + strings.Join(reqs, ",") + `]}`
	}
	if a := postMessages(ctx, h.gw.URL+"/v1/messages/batches", "sk-tpm", body(3)); a.status != http.StatusOK {
		t.Fatalf("first batch (about 950 of 1000 tokens) = %d %s", a.status, a.body)
	}
	a := postMessages(ctx, h.gw.URL+"/v1/messages/batches", "sk-tpm", body(3))
	if a.status != http.StatusTooManyRequests || !strings.Contains(a.body, `"rate_limit_error"`) {
		t.Errorf("second batch within the minute = %d %s; want 429 rate_limit_error", a.status, a.body)
	}
	if a := postMessages(ctx, h.gw.URL+"/v1/messages/batches", "sk-tpm", body(5)); a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "" {
		t.Errorf("a batch larger than the burst = %d %s; want 429 without Retry-After", a.status, a.body)
	}
}
