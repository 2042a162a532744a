package server

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// shortResponsesStream answers a Responses call for model "short" with a
// stream that ends cleanly (the body closes normally) before any end event.
func shortResponsesStream(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/responses" {
			next.ServeHTTP(w, r)
			return
		}
		b := make([]byte, 4096)
		n, _ := r.Body.Read(b)
		if !strings.Contains(string(b[:n]), `"short"`) {
			r.Body = http.NoBody
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_short\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
		fmt.Fprint(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"delta\":\"par\"}\n\n")
	})
}

// TestResponsesStreamEndingEarlyEndsWithErrorEvent: a Responses stream
// whose upstream body ends before response.completed (or another end
// event) ends with the API's error event on every path, the stored
// response's bypass included, never a bare close.
func TestResponsesStreamEndingEarlyEndsWithErrorEvent(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.wrapUpstream = shortResponsesStream })
	ctx := context.Background()
	for name, body := range map[string]string{
		"cached":             `{"model":"short","stream":true,"input":"a"}`,
		"store false bypass": `{"model":"short","stream":true,"input":"b","store":false,"background":true}`,
		"stored bypass":      `{"model":"short","stream":true,"input":"c","background":true}`,
	} {
		a := sendTo(ctx, h.gw.URL+"/v1/responses", acmeKey, body)
		if a.status != 200 || !strings.HasSuffix(strings.TrimSpace(a.body), "event: error\n"+`data: {"type":"error","code":"upstream_error","message":"The upstream stream ended before it was complete.","param":null}`) {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
}
