package main

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/tenant"
)

func writeTenants(t *testing.T, keyHash string) string {
	t.Helper()
	return writeTenantsFile(t, tenantYAML("team", keyHash))
}

// TestDemoKeyWithUpstreamKeyRefused: a tenants file that accepts the
// public demo key and a real upstream key do not start together unless
// CORRAL_ALLOW_DEMO_KEY says the operator means it; the refusal never
// echoes the upstream key.
func TestDemoKeyWithUpstreamKeyRefused(t *testing.T) {
	mock := httptest.NewServer(mockllm.New(mockllm.Options{}))
	t.Cleanup(mock.Close)
	demoFile := writeTenants(t, strings.ToUpper(tenant.HashKey(DemoKey)))
	base := []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_UPSTREAM_URL=" + mock.URL + "/v1"}

	err := run(context.Background(), nil, append(base, "CORRAL_TENANTS_FILE="+demoFile, "CORRAL_UPSTREAM_API_KEY=sk-real-secret"), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CORRAL_ALLOW_DEMO_KEY") || !strings.Contains(err.Error(), demoFile) {
		t.Fatalf("demo key + upstream key: run = %v; want a refusal naming the file and CORRAL_ALLOW_DEMO_KEY", err)
	}
	if strings.Contains(err.Error(), "sk-real-secret") {
		t.Error("the refusal contains the upstream key")
	}
	err = run(context.Background(), nil, append(base, "CORRAL_TENANTS_FILE="+demoFile, "OPENAI_API_KEY=sk-real-secret"), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CORRAL_ALLOW_DEMO_KEY") {
		t.Errorf("demo key + OPENAI_API_KEY fallback: run = %v; want the refusal", err)
	}

	// Each of these starts: the flag, no upstream key, a key of its own.
	starts := [][]string{
		{"CORRAL_TENANTS_FILE=" + demoFile, "CORRAL_UPSTREAM_API_KEY=sk-real-secret", "CORRAL_ALLOW_DEMO_KEY=true"},
		{"CORRAL_TENANTS_FILE=" + demoFile},
		{"CORRAL_TENANTS_FILE=" + writeTenants(t, tenant.HashKey("sk-own")), "CORRAL_UPSTREAM_API_KEY=sk-real-secret"},
	}
	for _, env := range starts {
		ctx, cancel := context.WithCancel(context.Background())
		stderr := newLineWriter()
		done := make(chan error, 1)
		env := append(env, "CORRAL_DATA_DIR="+t.TempDir())
		go func() { done <- run(ctx, nil, append(base, env...), io.Discard, stderr) }()
		stderr.waitFor(t, regexp.MustCompile(`corral listening`))
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run with %v = %v; want it to start and stop cleanly", env, err)
		}
	}
}

// TestStartupUpstreamCheck: a base URL without its /v1 answers GET /models
// with 404; the gateway warns, naming the URL, and serves anyway. A right
// URL passes without a warning.
func TestStartupUpstreamCheck(t *testing.T) {
	var models = make(chan string, 4)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/models") {
			models <- r.URL.Path + " " + r.Header.Get("Authorization")
		}
		if r.URL.Path != "/v1/models" {
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"error":{"message":"Invalid URL (GET /models)","type":"invalid_request_error","param":null,"code":null}}`)
			return
		}
		_, _ = io.WriteString(w, `{"object":"list","data":[]}`)
	}))
	t.Cleanup(up.Close)
	tests := []struct {
		give     string // CORRAL_UPSTREAM_URL
		wantPath string
		wantLog  *regexp.Regexp
	}{
		{up.URL, "/models", regexp.MustCompile(`"msg":"upstream check failed; serving anyway".*GET ` + regexp.QuoteMeta(up.URL) + `/models answered 404`)},
		{up.URL + "/v1", "/v1/models", regexp.MustCompile(`"msg":"upstream check passed"`)},
	}
	for _, tt := range tests {
		ctx, cancel := context.WithCancel(context.Background())
		stdout, stderr := newLineWriter(), newLineWriter()
		done := make(chan error, 1)
		env := []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_UPSTREAM_URL=" + tt.give, "CORRAL_UPSTREAM_API_KEY=sk-up", "CORRAL_DATA_DIR=" + t.TempDir()}
		go func() { done <- run(ctx, nil, env, stdout, stderr) }()
		if got := <-models; got != tt.wantPath+" Bearer sk-up" {
			t.Errorf("%s: upstream saw %q; want GET %s with Corral's key", tt.give, got, tt.wantPath)
		}
		stderr.waitFor(t, tt.wantLog)
		addr := stderr.waitFor(t, regexp.MustCompile(`"msg":"corral listening","addr":"([^"]+)"`))[1]
		resp, err := http.Get("http://" + addr + "/healthz")
		if err != nil || resp.StatusCode != 200 {
			t.Errorf("%s: gateway not serving after the check: %v", tt.give, err)
		}
		if resp != nil {
			resp.Body.Close()
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("%s: run = %v", tt.give, err)
		}
		if strings.Contains(stderr.String(), "sk-up") {
			t.Errorf("%s: logs contain the upstream key", tt.give)
		}
	}
}

// TestReloadRefusesDemoKey: a reload that would bring in the demo key next
// to a real upstream key is refused like a start, and the running tenants
// keep serving.
func TestReloadRefusesDemoKey(t *testing.T) {
	mock := serveMock(t, mockllm.Options{})
	file := writeTenants(t, tenant.HashKey("sk-own"))
	gw := mustGateway(t,
		"CORRAL_UPSTREAM_URL="+mock.URL+"/v1", "CORRAL_UPSTREAM_API_KEY=sk-real-secret",
		"CORRAL_TENANTS_FILE="+file, "CORRAL_DATA_DIR="+t.TempDir(),
	)
	writeFile(t, file, "tenants:\n"+tenantYAML("team", tenant.HashKey(DemoKey)))
	if _, err := gw.srv.Reload(); err == nil || !strings.Contains(err.Error(), "CORRAL_ALLOW_DEMO_KEY") {
		t.Fatalf("reload with the demo key = %v; want the refusal", err)
	}
	chat := func(key string) int {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		gw.ServeHTTP(rec, req)
		return rec.Code
	}
	if got := chat("sk-own"); got != http.StatusOK {
		t.Errorf("the running tenant after a refused reload = %d; want 200", got)
	}
	if got := chat(DemoKey); got != http.StatusUnauthorized {
		t.Errorf("the demo key after a refused reload = %d; want 401", got)
	}
}
