package mockllm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

// mock-stall sends its status and headers, then no body until the client
// leaves: the client's read blocks, and ends only with the client's cancel.
func TestStall(t *testing.T) {
	tests := []struct {
		name string
		path string
		give string
		want string // Content-Type
	}{
		{"chat", chatPath, `{"model":"mock-stall","messages":[{"role":"user","content":"hi"}]}`, "application/json"},
		{"chat stream", chatPath, `{"model":"mock-stall","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream"},
		{"messages stream", "/v1/messages", `{"model":"mock-stall","max_tokens":8,"stream":true,"messages":[{"role":"user","content":"hi"}]}`, "text/event-stream"},
		{"stall beats status", "/v1/embeddings", `{"model":"mock-stall","input":"x","mock":{"status":500}}`, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := startServer(t, mockllm.Options{})
			ctx, cancel := context.WithCancel(testContext(t))
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, ts.URL+tt.path, strings.NewReader(tt.give))
			resp, err := ts.Client().Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != tt.want {
				t.Fatalf("status %d, Content-Type %q; want 200, %q", resp.StatusCode, resp.Header.Get("Content-Type"), tt.want)
			}
			read := make(chan error, 1)
			go func() {
				n, err := io.Copy(io.Discard, resp.Body)
				if n != 0 {
					err = errors.New("read body bytes from a stalled answer")
				}
				read <- err
			}()
			// The read is still blocked once the mock counts the request in
			// flight; it ends with the client's cancel, never with data.
			if _, err := s.Wait(ctx, func(st mockllm.Stats) bool { return st.InFlight == 1 }); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-read:
				t.Fatalf("read ended before the client left: %v", err)
			default:
			}
			cancel()
			if err := <-read; !errors.Is(err, context.Canceled) {
				t.Errorf("read error = %v; want %v", err, context.Canceled)
			}
		})
	}
}
