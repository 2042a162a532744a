package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestUpstreamFailures(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.upstreamTimeout = 300 * time.Millisecond
		o.mock.SlowLatency = 10 * time.Second
	})
	tests := []struct {
		model      string
		wantStatus int
		wantCode   string
	}{
		{"mock-500", 500, ""}, // passed through with the upstream's body
		{"mock-429", 429, "rate_limit_exceeded"},
		{"mock-404", 404, "model_not_found"},
		{"mock-401", 502, "upstream_auth_error"},
		{"mock-403", 502, "upstream_auth_error"},
		{"mock-slow", 504, "upstream_timeout"},
	}
	for _, tt := range tests {
		t.Run(tt.model, func(t *testing.T) {
			resp := post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"`+tt.model+`","messages":[{"role":"user","content":"x"}]}`))
			if resp.StatusCode != tt.wantStatus {
				t.Fatalf("status = %d; want %d", resp.StatusCode, tt.wantStatus)
			}
			_, code, _ := openAIError(t, resp)
			if tt.wantCode != "" && code != tt.wantCode {
				t.Errorf("code = %q; want %q", code, tt.wantCode)
			}
		})
	}
	t.Run("mock-429 keeps Retry-After", func(t *testing.T) {
		resp := post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"mock-429"}`))
		if resp.Header.Get("Retry-After") != "1" || resp.Header.Get("Retry-After-Ms") != "1000" {
			t.Errorf("429 headers = %v; want the upstream's Retry-After and retry-after-ms", resp.Header)
		}
	})
}

func TestUpstreamUnreachable(t *testing.T) {
	h := newHarness(t)
	h.up.Close() // nothing listens there any more
	resp := post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"gpt-4o-mini"}`))
	if resp.StatusCode != 502 {
		t.Fatalf("status = %d; want 502", resp.StatusCode)
	}
	if _, code, _ := openAIError(t, resp); code != "upstream_error" {
		t.Errorf("code = %q; want upstream_error", code)
	}
}

func TestStreamCutMidway(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 6 })
	resp := post(t, h, "/v1/chat/completions", acmeKey, []byte(`{"model":"mock-cut","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if resp.StatusCode != 200 {
		t.Fatalf("status = %d; want 200 (headers were sent before the cut)", resp.StatusCode)
	}
	body, _ := io.ReadAll(resp.Body)
	events := strings.Split(strings.TrimSpace(string(body)), "\n\n")
	last := events[len(events)-1]
	if !strings.Contains(last, `"code":"upstream_error"`) || strings.Contains(string(body), "[DONE]") {
		t.Errorf("stream ends with %q; want an upstream_error event and no [DONE]", last)
	}
	// The SDK reports it as an error, not a short answer.
	stream, err := sdk(h, acmeKey).CreateChatCompletionStream(context.Background(), chatReq("mock-cut", "y"))
	if err != nil {
		t.Fatalf("open stream: %v", err)
	}
	defer stream.Close()
	if err := streamEnd(stream); errors.Is(err, io.EOF) {
		t.Error("SDK saw a clean end of a cut stream; want an error")
	}
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	h := newHarness(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := sdk(h, acmeKey).CreateChatCompletion(ctx, chatReq("mock-hang", "wait"))
		errc <- err
	}()
	// Cancel once the upstream has the call in flight.
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("client error = %v; want context.Canceled", err)
	}
	wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer wcancel()
	if err := h.mock.WaitCancelled(wctx, 1); err != nil {
		t.Fatalf("the upstream call was not cancelled after the client hung up: %v", err)
	}
}

func TestNonJSONAnswerIsNotStored(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html>maintenance</html>"))
			})
		}
	})
	for range 2 {
		if a := send(context.Background(), h.gw.URL, acmeKey, chatBody("html")); a.header.Get("X-Corral-Cache") != cacheMiss {
			t.Errorf("X-Corral-Cache = %s; want MISS both times (a non-JSON 200 is not an answer)", a.header.Get("X-Corral-Cache"))
		}
	}
}
