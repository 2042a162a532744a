package mockllm_test

import (
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

const chatPath = "/v1/chat/completions"

func TestCutStream(t *testing.T) {
	tests := []struct {
		name         string
		path         string
		give         string
		wantContents int
	}{
		{"mock-cut cuts half way", chatPath, `{"model":"mock-cut","stream":true,"messages":[{"role":"user","content":"a long enough prompt"}]}`, 2},
		{"mock-cut with chunks", chatPath, `{"model":"mock-cut","stream":true,"mock":{"chunks":10},"messages":[{"role":"user","content":"a long enough prompt"}]}`, 5},
		{"cut_after 0", chatPath, `{"model":"m","stream":true,"mock":{"cut_after":0},"messages":[{"role":"user","content":"a long enough prompt"}]}`, 0},
		{"cut_after all content", chatPath, `{"model":"m","stream":true,"mock":{"cut_after":99},"messages":[{"role":"user","content":"a long enough prompt"}]}`, 5},
		{"completions", "/v1/completions", `{"model":"mock-cut","stream":true,"prompt":"a long enough prompt"}`, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, ts := startServer(t, mockllm.Options{})
			_, events, err := postStream(t, ts, tt.path, tt.give)
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("read error = %v, want %v", err, io.ErrUnexpectedEOF)
			}
			got := parseStream(t, events, tt.path == chatPath)
			if got.done || got.finishes != 0 || got.contents != tt.wantContents {
				t.Errorf("done, finishes, contents = %v, %d, %d; want false, 0, %d", got.done, got.finishes, got.contents, tt.wantContents)
			}
			st, err := s.Wait(testContext(t), func(st mockllm.Stats) bool { return st.InFlight == 0 })
			if err != nil || st.Cuts != 1 || st.Cancelled != 0 {
				t.Errorf("stats = %+v, %v; want 1 cut, 0 cancelled", st, err)
			}
		})
	}
}

func TestCutBody(t *testing.T) {
	tests := []struct {
		name string
		path string
		give string
	}{
		{"chat", "/v1/chat/completions", `{"model":"mock-cut","messages":[{"role":"user","content":"hi"}]}`},
		{"completions", "/v1/completions", `{"model":"m","mock":{"cut_after":0},"prompt":"hi"}`},
		{"embeddings", "/v1/embeddings", `{"model":"mock-cut","input":"hi"}`},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := ts.Client().Post(ts.URL+tt.path, "application/json", strings.NewReader(tt.give))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if resp.StatusCode != 200 || !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Errorf("status, read error = %d, %v; want 200, %v", resp.StatusCode, err, io.ErrUnexpectedEOF)
			}
			if len(b) == 0 || int64(len(b)) >= resp.ContentLength {
				t.Errorf("read %d of %d bytes, want a non-empty prefix", len(b), resp.ContentLength)
			}
		})
	}
}
