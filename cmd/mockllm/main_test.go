package main

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestParseConfig(t *testing.T) {
	defaults := mockllm.Options{StreamChunks: 5, SlowLatency: 5 * time.Second}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{name: "defaults", want: config{addr: "127.0.0.1:9090", opts: defaults}},
		{
			name: "env",
			env: map[string]string{
				"MOCKLLM_ADDR": ":1234", "MOCKLLM_LATENCY": "20ms", "MOCKLLM_CHUNKS": "9",
				"MOCKLLM_CHUNK_DELAY": "1ms", "MOCKLLM_SLOW_LATENCY": "2s",
			},
			want: config{addr: ":1234", opts: mockllm.Options{Latency: 20 * time.Millisecond, StreamChunks: 9, ChunkDelay: time.Millisecond, SlowLatency: 2 * time.Second}},
		},
		{
			name: "flags beat env",
			args: []string{"-addr", ":1", "-latency", "1s", "-chunks", "2", "-chunk-delay", "3ms", "-slow-latency", "1m"},
			env:  map[string]string{"MOCKLLM_ADDR": ":1234", "MOCKLLM_CHUNKS": "9"},
			want: config{addr: ":1", opts: mockllm.Options{Latency: time.Second, StreamChunks: 2, ChunkDelay: 3 * time.Millisecond, SlowLatency: time.Minute}},
		},
		{name: "bad env duration", env: map[string]string{"MOCKLLM_LATENCY": "soon"}, wantErr: "MOCKLLM_LATENCY"},
		{name: "bad env int", env: map[string]string{"MOCKLLM_CHUNKS": "many"}, wantErr: "MOCKLLM_CHUNKS"},
		{name: "zero chunks", args: []string{"-chunks", "0"}, wantErr: "chunks"},
		{name: "negative latency", args: []string{"-latency", "-1s"}, wantErr: "latency"},
		{name: "stray argument", args: []string{"serve"}, wantErr: "unexpected argument"},
		{name: "unknown flag", args: []string{"-nope"}, wantErr: "nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseConfig(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(config{})); diff != "" {
				t.Errorf("config mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServe(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- serve(ctx, ln, mockllm.New(mockllm.Options{})) }()

	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	resp, err := client.Post("http://"+ln.Addr().String()+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "mock reply to: hi") {
		t.Errorf("answer = %d %s, want 200 and the mock reply", resp.StatusCode, body)
	}

	cancel()
	if err := <-errc; err != nil {
		t.Errorf("serve after cancel = %v, want nil", err)
	}
}

func TestRunBadAddress(t *testing.T) {
	err := run(t.Context(), []string{"-addr", "127.0.0.1:bad"}, func(string) string { return "" }, io.Discard)
	if err == nil {
		t.Fatal("run with a bad address succeeded")
	}
}

// lineWriter passes each write to a channel.
type lineWriter chan string

func (w lineWriter) Write(p []byte) (int, error) {
	w <- string(p)
	return len(p), nil
}

func TestRunLogsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	logs := make(lineWriter, 1)
	errc := make(chan error, 1)
	go func() { errc <- run(ctx, []string{"-addr", "127.0.0.1:0"}, func(string) string { return "" }, logs) }()

	line := <-logs
	if !strings.Contains(line, "mockllm listening") || !strings.Contains(line, "addr=127.0.0.1:") {
		t.Errorf("start line = %q, want the listening address", line)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("run after cancel = %v, want nil", err)
	}
}
