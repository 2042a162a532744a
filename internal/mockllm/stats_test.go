package mockllm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestStats(t *testing.T) {
	s, ts := startServer(t, mockllm.Options{})
	post(t, ts, chatPath, `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	post(t, ts, chatPath, `{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	post(t, ts, chatPath, `{"model":"mock-500","messages":[{"role":"user","content":"hi"}]}`)
	post(t, ts, "/v1/embeddings", `{"model":"e","input":"hi"}`)
	post(t, ts, "/v1/nope", `{}`)
	get(t, ts.URL+"/v1/models", ts.Client())

	want := mockllm.Stats{
		Requests: 6,
		Streams:  1,
		Errors:   2,
		Paths: map[string]int64{
			"/v1/chat/completions": 3,
			"/v1/embeddings":       1,
			"/v1/models":           1,
			"other":                1,
		},
		Models: map[string]int64{"gpt-4o": 2, "mock-500": 1, "e": 1},
	}
	got, err := s.Wait(testContext(t), func(st mockllm.Stats) bool { return st.InFlight == 0 })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Stats() mismatch (-want +got):\n%s", diff)
	}

	// The control endpoints serve the same numbers and are not counted.
	status, body := get(t, ts.URL+"/mock/stats", ts.Client())
	if diff := cmp.Diff(want, decode[mockllm.Stats](t, body)); status != 200 || diff != "" {
		t.Errorf("GET /mock/stats = %d, mismatch (-want +got):\n%s", status, diff)
	}
	resp, err := ts.Client().Post(ts.URL+"/mock/reset", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		t.Errorf("POST /mock/reset = %d, want 204", resp.StatusCode)
	}
	zero := mockllm.Stats{Paths: map[string]int64{}, Models: map[string]int64{}}
	if diff := cmp.Diff(zero, s.Stats()); diff != "" {
		t.Errorf("after reset (-want +got):\n%s", diff)
	}
}

func TestResetKeepsInFlight(t *testing.T) {
	release := make(chan struct{})
	s, ts := startServer(t, mockllm.Options{OnRequest: func(*http.Request) { <-release }})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if status, err := tryPost(ts, chatPath, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); status != 200 {
			t.Errorf("status = %d, %v; want 200", status, err)
		}
	}()
	ctx := testContext(t)
	if _, err := s.Wait(ctx, func(st mockllm.Stats) bool { return st.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	s.Reset()
	if got := s.Stats(); got.InFlight != 1 || got.Requests != 0 {
		t.Errorf("after reset in flight, requests = %d, %d; want 1, 0", got.InFlight, got.Requests)
	}
	close(release)
	<-done
	if _, err := s.Wait(ctx, func(st mockllm.Stats) bool { return st.InFlight == 0 }); err != nil {
		t.Errorf("in flight never returned to 0: %v", err)
	}
}

// TestOnRequestGate shows the use of OnRequest as a gate: hold requests
// until a number of them have arrived, then let them all go.
func TestOnRequestGate(t *testing.T) {
	const n = 3
	release := make(chan struct{})
	s, ts := startServer(t, mockllm.Options{OnRequest: func(*http.Request) { <-release }})
	var wg sync.WaitGroup
	statuses := make([]int, n)
	for i := range n {
		wg.Go(func() {
			statuses[i], _ = tryPost(ts, chatPath, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
		})
	}
	if _, err := s.Wait(testContext(t), func(st mockllm.Stats) bool { return st.InFlight == n }); err != nil {
		t.Fatal(err)
	}
	close(release)
	wg.Wait()
	for i, st := range statuses {
		if st != 200 {
			t.Errorf("request %d: status %d, want 200", i, st)
		}
	}
}

func TestWaitContextEnds(t *testing.T) {
	s := mockllm.New(mockllm.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Wait(ctx, func(mockllm.Stats) bool { return false }); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on a cancelled context = %v, want %v", err, context.Canceled)
	}
}

func TestCancelled(t *testing.T) {
	tests := []struct {
		name  string
		opts  mockllm.Options
		model string
		path  string
		give  string
	}{
		{"mock-hang", mockllm.Options{}, "mock-hang", chatPath, `{"model":"mock-hang","messages":[{"role":"user","content":"hi"}]}`},
		{"mock-slow", mockllm.Options{SlowLatency: time.Hour}, "mock-slow", chatPath, `{"model":"mock-slow","messages":[{"role":"user","content":"hi"}]}`},
		{"latency", mockllm.Options{Latency: time.Hour}, "m", "/v1/completions", `{"model":"m","prompt":"hi"}`},
		{"latency override", mockllm.Options{}, "m", "/v1/embeddings", `{"model":"m","input":"hi","mock":{"latency_ms":3600000}}`},
		{"chunk delay", mockllm.Options{ChunkDelay: time.Hour}, "m", chatPath, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`},
		{"chunk delay override", mockllm.Options{}, "m", "/v1/completions", `{"model":"m","stream":true,"prompt":"hi","mock":{"chunk_delay_ms":3600000}}`},
		{"hang beats status", mockllm.Options{}, "mock-hang", "/v1/embeddings", `{"model":"mock-hang","input":"x","mock":{"status":500}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := startServer(t, tt.opts)
			ctx := testContext(t)
			reqCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			errc := make(chan error, 1)
			go func() {
				req, _ := http.NewRequestWithContext(reqCtx, "POST", ts.URL+tt.path, strings.NewReader(tt.give))
				resp, err := ts.Client().Do(req)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				errc <- err
			}()

			// The body has been read once the model is counted.
			if _, err := s.Wait(ctx, func(st mockllm.Stats) bool { return st.Models[tt.model] == 1 }); err != nil {
				t.Fatal(err)
			}
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Errorf("client error = %v, want %v", err, context.Canceled)
			}
			if err := s.WaitCancelled(ctx, 1); err != nil {
				t.Fatalf("WaitCancelled: %v; stats %+v", err, s.Stats())
			}
			st, err := s.Wait(ctx, func(st mockllm.Stats) bool { return st.InFlight == 0 })
			if err != nil || st.Cancelled != 1 || st.Errors != 0 {
				t.Errorf("stats = %+v, %v; want 1 cancelled, 0 errors, 0 in flight", st, err)
			}
		})
	}
}

func TestOverrides(t *testing.T) {
	tests := []struct {
		name       string
		opts       mockllm.Options
		give       string
		wantStatus int
		wantType   string
		wantCode   string
	}{
		{"status", mockllm.Options{}, `{"model":"gpt-4o","mock":{"status":503},"messages":[{"role":"user","content":"hi"}]}`, 503, "server_error", "service_unavailable"},
		{"unusual status", mockllm.Options{}, `{"model":"gpt-4o","mock":{"status":418},"messages":[{"role":"user","content":"hi"}]}`, 418, "invalid_request_error", "mock_error"},
		{"unusual 5xx", mockllm.Options{}, `{"model":"gpt-4o","mock":{"status":599},"messages":[{"role":"user","content":"hi"}]}`, 599, "server_error", "mock_error"},
		{"status beats model", mockllm.Options{}, `{"model":"mock-404","mock":{"status":429},"messages":[{"role":"user","content":"hi"}]}`, 429, "requests", "rate_limit_exceeded"},
		// A one-hour latency in Options would hang the test if the
		// override did not replace it.
		{"latency_ms replaces Options", mockllm.Options{Latency: time.Hour}, `{"model":"mock-400","mock":{"latency_ms":0},"messages":[{"role":"user","content":"hi"}]}`, 400, "invalid_request_error", "invalid_request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := startServer(t, tt.opts)
			status, h, body := post(t, ts, chatPath, tt.give)
			checkError(t, status, h, body, tt.wantStatus, tt.wantType, tt.wantCode)
		})
	}
}

func TestSlowAnswers(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{SlowLatency: time.Millisecond})
	status, _, body := post(t, ts, chatPath, `{"model":"mock-slow","messages":[{"role":"user","content":"hi"}]}`)
	if c := decode[chatCompletion](t, body); status != 200 || c.Choices[0].Message.Content != "mock reply to: hi" {
		t.Errorf("mock-slow = %d %s, want 200 and a normal answer", status, body)
	}
}
