package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
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
		if a.status != 200 || !strings.HasSuffix(strings.TrimSpace(a.body), "event: error\n"+`data: {"type":"error","code":"upstream_error","message":"The upstream stream ended before it was complete.","param":null,"sequence_number":2}`) {
			t.Errorf("%s: %d %s", name, a.status, a.body)
		}
	}
}

// heldResponsesStream answers a Responses call for model "held" with
// three events (sequence numbers 0 to 2), then holds the stream open
// until release is closed and ends the body without an end event. Other
// calls go to next.
// calls counts the held calls.
func heldResponsesStream(release <-chan struct{}, calls *atomic.Int32) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if r.URL.Path != "/v1/responses" || !strings.Contains(string(b), `"held"`) {
				next.ServeHTTP(w, r)
				return
			}
			calls.Add(1)
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_held\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
			fmt.Fprint(w, "event: response.in_progress\ndata: {\"type\":\"response.in_progress\",\"sequence_number\":1,\"response\":{\"id\":\"resp_held\",\"object\":\"response\",\"status\":\"in_progress\",\"output\":[]}}\n\n")
			fmt.Fprint(w, "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"sequence_number\":2,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"par\"}\n\n")
			w.(http.Flusher).Flush()
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
	}
}

// sdkCutStream streams a Responses call through openai-go, signals got
// once it has the event numbered 2, and returns every event it decoded
// and the answer's X-Corral-Cache.
func sdkCutStream(base, body string, got chan<- struct{}) ([]responses.ResponseStreamEventUnion, string, error) {
	c := officialopenai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	var p responses.ResponseNewParams
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		return nil, "", err
	}
	var raw *http.Response
	st := c.Responses.NewStreaming(context.Background(), p, option.WithResponseInto(&raw))
	var out []responses.ResponseStreamEventUnion
	for st.Next() {
		ev := st.Current()
		out = append(out, ev)
		if ev.SequenceNumber == 2 && got != nil {
			got <- struct{}{}
		}
	}
	if raw == nil {
		return out, "", st.Err()
	}
	return out, raw.Header.Get("X-Corral-Cache"), st.Err()
}

// TestCutResponsesStreamsNumberTheirErrorEvent: a Responses stream Corral
// must cut ends with the API's error event numbered after the last event
// each client got, on every path that writes one: the leader's own
// client, a follower on its instance, a mirror on another instance, a
// bypass, and a replay cut by a shutdown. openai-go decodes each as a
// ResponseErrorEvent with every field present.
func TestCutResponsesStreamsNumberTheirErrorEvent(t *testing.T) {
	release := make(chan struct{})
	var held atomic.Int32
	h, _ := distributed(t, 2, func(o *harnessOptions) { o.wrapUpstream = heldResponsesStream(release, &held) })
	const body = `{"model":"held","input":"cut me","stream":true}`

	type result struct {
		name, cache string
		events      []responses.ResponseStreamEventUnion
		err         error
	}
	results := make(chan result, 4)
	got := make(chan struct{}, 4)
	start := func(name, base, body string) {
		go func() {
			evs, cache, err := sdkCutStream(base, body, got)
			results <- result{name, cache, evs, err}
		}()
	}
	start("leader", h.gws[0].URL, body)
	<-got
	start("local follower", h.gws[0].URL, body)
	start("mirror on another instance", h.gws[1].URL, body)
	start("bypass", h.gws[0].URL, `{"model":"held","input":"cut me","stream":true,"background":true}`)
	for range 3 {
		<-got
	}
	close(release)
	wantCache := map[string]string{"leader": "MISS", "local follower": "COALESCED", "mirror on another instance": "COALESCED", "bypass": "BYPASS"}
	for range 4 {
		r := <-results
		if r.cache != wantCache[r.name] {
			t.Errorf("%s: X-Corral-Cache %q; want %q", r.name, r.cache, wantCache[r.name])
		}
		checkCutAt(t, r.name, r.events, r.err, 3)
	}
	if n := held.Load(); n != 2 {
		t.Errorf("%d upstream calls; want 2 (the flight's and the bypass's)", n)
	}

	// A replay cut by Stop: the entry is stored, then the instance stops
	// before its first event. (A streaming lookup in distributed mode
	// rides the flight's lock, which Stop ends: one instance alone
	// replays from its lookup.)
	one := newHarness(t)
	stored := `{"model":"gpt-4o-mini","input":"replayed","stream":true}`
	if evs, _, err := sdkCutStream(one.gw.URL, stored, nil); err != nil || len(evs) == 0 || evs[len(evs)-1].Type != "response.completed" {
		t.Fatalf("storing the replayed answer: %v", err)
	}
	one.srv.Stop()
	evs, cache, err := sdkCutStream(one.gw.URL, stored, nil)
	if cache != "HIT" {
		t.Errorf("replay: X-Corral-Cache %q; want HIT", cache)
	}
	checkCutAt(t, "replay cut by a shutdown", evs, err, 0)
}

// checkCutAt checks a stream cut after n events: the SDK read all of
// them and then the error event, numbered n.
func checkCutAt(t *testing.T, name string, events []responses.ResponseStreamEventUnion, err error, n int64) {
	t.Helper()
	if err != nil {
		t.Errorf("%s: the SDK failed the stream: %v", name, err)
		return
	}
	if int64(len(events)) != n+1 {
		t.Errorf("%s: %d events; want %d and the error event", name, len(events), n)
		return
	}
	e := events[n].AsError()
	if events[n].Type != "error" || e.SequenceNumber != n || !e.JSON.SequenceNumber.Valid() || e.Code == "" || e.Message == "" {
		t.Errorf("%s: last event %s", name, events[n].RawJSON())
		return
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(e.RawJSON()), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"type", "code", "message", "param", "sequence_number"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("%s: the error event has no %s: %s", name, k, e.RawJSON())
		}
	}
}
