package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/mockllm"
)

// The set-up the command's tests share: files the gateway reads, the mock
// upstream, and a gateway wired from an environment as run wires it.

// tenantYAML is one entry of a tenants file: tenant id accepting the key
// whose SHA-256 is keyHash, with extra settings ("name: value" each).
func tenantYAML(id, keyHash string, extra ...string) string {
	s := "  - id: " + id + "\n    keys: [{sha256: \"" + keyHash + "\"}]\n"
	for _, e := range extra {
		s += "    " + e + "\n"
	}
	return s
}

// writeTenantsFile writes a tenants file of entries (tenantYAML) into a
// fresh temporary directory and returns its path.
func writeTenantsFile(tb testing.TB, entries ...string) string {
	tb.Helper()
	return writeFile(tb, filepath.Join(tb.TempDir(), "tenants.yaml"), "tenants:\n"+strings.Join(entries, ""))
}

// writeFile writes body to path (created or replaced) and returns path.
func writeFile(tb testing.TB, path, body string) string {
	tb.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		tb.Fatal(err)
	}
	return path
}

// serveMock serves the mock model with opts over real HTTP until the test
// ends.
func serveMock(tb testing.TB, opts mockllm.Options) *httptest.Server {
	tb.Helper()
	srv := httptest.NewServer(mockllm.New(opts))
	tb.Cleanup(srv.Close)
	return srv
}

// wireGateway loads the environment env and wires a gateway from it with
// opts (a logger that discards, when opts has none); the gateway is closed
// with the test.
func wireGateway(tb testing.TB, opts gatewayOptions, env ...string) *gateway {
	tb.Helper()
	cfg, err := config.Load(env)
	if err != nil {
		tb.Fatal(err)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	gw, err := newGateway(context.Background(), cfg, opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(gw.Close)
	return gw
}

// mustGateway wires a gateway from the environment env, closed with the
// test.
func mustGateway(tb testing.TB, env ...string) *gateway {
	tb.Helper()
	return wireGateway(tb, gatewayOptions{}, env...)
}

// serveGateway serves gw over real HTTP; the server closes with the test,
// before the gateway does.
func serveGateway(tb testing.TB, gw *gateway) *httptest.Server {
	srv := httptest.NewServer(gw)
	tb.Cleanup(srv.Close)
	return srv
}
