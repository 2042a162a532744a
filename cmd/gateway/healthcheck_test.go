package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// startDemo runs the whole program in demo mode on a free loopback port
// and returns its listen address; cleanup stops it and checks it exited
// cleanly.
func startDemo(t *testing.T, environ ...string) (addr string, stderr *lineWriter) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	dataDir := t.TempDir()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo"}, append([]string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + dataDir}, environ...), stdout, stderr)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run = %v after shutdown", err)
		}
	})
	base := stdout.waitFor(t, regexp.MustCompile(`base URL: http://(\S+)/v1`))[1]
	return base, stderr
}

func TestHealthcheckLiveGateway(t *testing.T) {
	addr, _ := startDemo(t)
	var out bytes.Buffer
	if err := run(context.Background(), []string{"healthcheck"}, []string{"CORRAL_ADDR=" + addr}, &out, io.Discard); err != nil {
		t.Fatalf("healthcheck against a live gateway = %v; want nil", err)
	}
	if strings.TrimSpace(out.String()) != "ready" {
		t.Errorf("healthcheck printed %q; want ready", out.String())
	}
}

func TestHealthcheckDeadGateway(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now
	err = run(context.Background(), []string{"healthcheck"}, []string{"CORRAL_ADDR=" + addr}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "healthcheck") {
		t.Errorf("healthcheck against a dead gateway = %v; want an error", err)
	}
}

func TestHealthcheckNotReady(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"not_ready"}`)
	}))
	t.Cleanup(srv.Close)
	err := run(context.Background(), []string{"healthcheck", "-url", srv.URL + "/readyz"}, nil, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "503") {
		t.Errorf("healthcheck against a 503 = %v; want an error naming 503", err)
	}
}

func TestReadyURL(t *testing.T) {
	tests := []struct{ give, want string }{
		{":8080", "http://127.0.0.1:8080/readyz"},
		{"0.0.0.0:9000", "http://127.0.0.1:9000/readyz"},
		{"[::]:9000", "http://127.0.0.1:9000/readyz"},
		{"127.0.0.2:81", "http://127.0.0.2:81/readyz"},
		{"[::1]:81", "http://[::1]:81/readyz"},
	}
	for _, tt := range tests {
		if got, err := readyURL(tt.give); err != nil || got != tt.want {
			t.Errorf("readyURL(%q) = %q, %v; want %q", tt.give, got, err, tt.want)
		}
	}
	if _, err := readyURL("8080"); err == nil {
		t.Error("readyURL(8080) = nil error; want one (no port separator)")
	}
}
