package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/objects/objectstest"
)

// TestObjectsBatchLinesNameOthersObjects: a batch's input file is the
// caller's, but its lines are requests the upstream runs itself, in the
// shared account. A line with previous_response_id of another tenant's
// response would chain onto it, so Corral reads the input file back and
// refuses the batch.
func TestObjectsBatchLinesNameOthersObjects(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	ctx := context.Background()
	ac := objectstest.SDK(h.gw.URL, acmeKey)
	resp, err := ac.Responses.New(ctx, responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String("secret")}})
	if err != nil {
		t.Fatal(err)
	}
	line := `{"custom_id":"1","method":"POST","url":"/v1/responses","body":{"model":"gpt-4o-mini","previous_response_id":"` + resp.ID + `","input":"repeat it"}}` + "\n"
	bc := objectstest.SDK(h.gw.URL, betaKey)
	f, err := bc.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(line), "in.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	batches := len(fake.CallsMentioning("POST /v1/batches"))
	_, err = bc.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: f.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1Responses, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h})
	var apiErr *officialopenai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || !strings.Contains(apiErr.Message, "No such object: "+resp.ID) {
		t.Errorf("beta's batch whose line chains onto acme's response %s = %v; want 404 naming it", resp.ID, err)
	}
	if n := len(fake.CallsMentioning("POST /v1/batches")); n != batches {
		t.Error("the refused batch reached the upstream")
	}
	// acme's own batch over a line naming its own response goes through.
	af, err := ac.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader(line), "in.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ac.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: af.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1Responses, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h}); err != nil {
		t.Errorf("acme's batch over its own response: %v", err)
	}
	// A line Corral cannot read refuses the batch too.
	bad, err := bc.Files.New(ctx, officialopenai.FileNewParams{File: officialopenai.File(strings.NewReader("not json\n"), "bad.jsonl", "application/jsonl"), Purpose: officialopenai.FilePurposeBatch})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bc.Batches.New(ctx, officialopenai.BatchNewParams{InputFileID: bad.ID, Endpoint: officialopenai.BatchNewParamsEndpointV1Responses, CompletionWindow: officialopenai.BatchNewParamsCompletionWindow24h}); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest {
		t.Errorf("a batch over an unreadable input file = %v; want 400", err)
	}
}

// TestObjectsFineTunedModelsAreShared: a fine-tuned model is the product
// of a tenant's fine-tuning job; no other tenant may delete, read or call
// it, and the model list shows a tenant only its own fine-tuned models.
func TestFineTunedModelsAreTheirOwners(t *testing.T) {
	model := "ft:gpt-4o-mini:corral::acmeJob1"
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		o.mock.Models = []string{"gpt-4o-mini", model, "ft:gpt-4o-mini:corral::nobodys"}
	})
	if err := h.srv.objects.Assign(context.Background(), model, objects.Owner{Tenant: "acme", Upstream: "default", Kind: "model"}); err != nil {
		t.Fatal(err)
	}
	chat := `{"model":"` + model + `","messages":[{"role":"user","content":"hi"}]}`
	for _, tt := range []struct{ method, path, body string }{
		{"DELETE", "/v1/models/" + model, ""},
		{"GET", "/v1/models/" + model, ""},
		{"POST", "/v1/chat/completions", chat},
		{"POST", "/v1/responses", `{"model":"` + model + `","input":"hi"}`},
	} {
		if code, body := objectstest.Call(t, tt.method, h.gw.URL+tt.path, betaKey, tt.body); code != http.StatusNotFound || body != objectstest.NotFoundBody(model) {
			t.Errorf("beta %s %s = %d %s; want 404", tt.method, tt.path, code, body)
		}
	}
	if n := log.mentioning(model); n != 0 {
		t.Errorf("beta's requests naming acme's fine-tuned model reached the upstream %d times", n)
	}
	if code, body := objectstest.Call(t, "POST", h.gw.URL+"/v1/chat/completions", acmeKey, chat); code != http.StatusOK {
		t.Errorf("acme calling its own fine-tuned model = %d %s", code, body)
	}
	if got := objectstest.ListIDs(t, h.gw.URL, "/v1/models", betaKey); strings.Join(got, ",") != "gpt-4o-mini" {
		t.Errorf("beta's model list = %v; want only the base model", got)
	}
	if got := objectstest.ListIDs(t, h.gw.URL, "/v1/models", acmeKey); strings.Join(got, ",") != "gpt-4o-mini,"+model {
		t.Errorf("acme's model list = %v; want the base model and its own fine-tuned one", got)
	}
}

// TestObjectsEmptyFilteredPageStopsThePager: a caller whose objects sit
// behind more than one page of other tenants' objects still gets them:
// after the first page Corral reads the upstream 100 at a time, so an
// SDK auto-pager with limit 1 does not meet an empty page and stop.
func TestObjectsEmptyFilteredPageStopsThePager(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	for i := 0; i < maxListPages+1; i++ {
		newFile(t, h.gw.URL, betaKey, fmt.Sprintf("b%d.jsonl", i))
	}
	mine := newFile(t, h.gw.URL, acmeKey, "a.jsonl")
	c := objectstest.SDK(h.gw.URL, acmeKey)
	pager := c.Files.ListAutoPaging(context.Background(), officialopenai.FileListParams{Limit: officialopenai.Int(1)})
	var got []string
	for pager.Next() {
		got = append(got, pager.Current().ID)
	}
	if pager.Err() != nil || len(got) != 1 || got[0] != mine {
		t.Errorf("acme's auto-paged files = %v, %v; want [%s]", got, pager.Err(), mine)
	}
}

// TestReviewTraceIsNotForwarded: TRACE on a collection root was an Action
// and forwarded with Corral's upstream key; an upstream or proxy that
// answers TRACE (Apache httpd does by default) echoes the request back,
// Authorization header included.
func TestObjectsTraceIsNotForwarded(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log), func(o *harnessOptions) {
		inner := o.wrapUpstream
		o.wrapUpstream = func(mock http.Handler) http.Handler {
			next := inner(mock)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodTrace {
					log.add(r.Method + " " + r.URL.String())
					w.Header().Set("Content-Type", "message/http")
					_, _ = io.WriteString(w, "TRACE "+r.URL.Path+" HTTP/1.1\r\nAuthorization: "+r.Header.Get("Authorization")+"\r\n")
					return
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	for _, p := range []string{"/v1/files", "/v1/audio/speech"} {
		code, body := objectstest.Call(t, "TRACE", h.gw.URL+p, betaKey, "")
		if code != http.StatusMethodNotAllowed || strings.Contains(body, "Authorization") {
			t.Errorf("TRACE %s = %d %s; want 405", p, code, body)
		}
	}
	if log.count() != 0 {
		t.Errorf("forwarded: %v", log.since(0))
	}
}
