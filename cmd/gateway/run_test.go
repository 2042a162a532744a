package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/httpserve"
	"github.com/corralhq/corral/internal/tenant"
)

// lineWriter collects output and signals each write, so a test can wait
// for a line without sleeping.
type lineWriter struct {
	mu    sync.Mutex // protects buf
	buf   bytes.Buffer
	wrote chan struct{}
}

func newLineWriter() *lineWriter { return &lineWriter{wrote: make(chan struct{}, 100)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return w.buf.Write(p)
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// waitFor blocks until re matches the output.
func (w *lineWriter) waitFor(t *testing.T, re *regexp.Regexp) []string {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		if m := re.FindStringSubmatch(w.String()); m != nil {
			return m
		}
		select {
		case <-w.wrote:
		case <-timeout:
			t.Fatalf("output never matched %s; got:\n%s", re, w.String())
		}
	}
}

func TestKeygen(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"keygen"}, nil, &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`key: (sk-corral-\S+)[\s\S]*sha256: "([0-9a-f]{64})"`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("keygen output %q has no key and sha256 line", out.String())
	}
	if tenant.HashKey(m[1]) != m[2] {
		t.Error("printed sha256 is not the hash of the printed key")
	}
	var again bytes.Buffer
	_ = run(context.Background(), []string{"keygen"}, nil, &again, io.Discard)
	if again.String() == out.String() {
		t.Error("two keygen runs printed the same key")
	}
}

// postDemo posts body to url with the one credential header given and
// returns the status and the whole body.
func postDemo(t *testing.T, url, body, header, value string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	req.Header.Set(header, value)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, string(b)
}

func TestRunDemoServesAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo"}, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + t.TempDir()}, stdout, stderr)
	}()

	base := stdout.waitFor(t, regexp.MustCompile(`base URL: (http://\S+)`))[1]
	if !strings.Contains(stdout.String(), "curl -si "+base+"/chat/completions") || !strings.Contains(stdout.String(), DemoKey) {
		t.Errorf("demo banner lacks the curl line or key:\n%s", stdout)
	}
	// The console, with the admin token made for this run.
	m := regexp.MustCompile(`console:  (http://\S+/console/)  \(admin token: (demo-admin-[0-9a-f]{48})\)`).FindStringSubmatch(stdout.String())
	if m == nil || m[1] != strings.TrimSuffix(base, "/v1")+"/console/" {
		t.Fatalf("demo banner lacks the console's URL and admin token:\n%s", stdout)
	}
	consoleURL, token := m[1], m[2]
	root := strings.TrimSuffix(consoleURL, "/console/")
	req, _ := http.NewRequest(http.MethodPost, consoleURL+"login", strings.NewReader("token="+token))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", root)
	if resp, _ := consoleDo(t, req); resp.StatusCode != http.StatusSeeOther || len(resp.Cookies()) != 1 {
		t.Errorf("console sign-in with the printed token: %d, %d cookies; want 303 and the session", resp.StatusCode, len(resp.Cookies()))
	}
	if resp, _ := consoleGet(t, root, "/", ""); resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/console/" {
		t.Errorf("GET / = %d to %q; want a redirect to the console", resp.StatusCode, resp.Header.Get("Location"))
	}
	if code, body := postDemo(t, base+"/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Hello, Corral"}]}`,
		"Authorization", "Bearer "+DemoKey); code != 200 || !strings.Contains(body, "mock reply to: Hello, Corral") {
		t.Errorf("demo chat = %d %s", code, body)
	}
	// The demo's mock answers the Responses API and Anthropic's Messages too.
	for _, tt := range []struct{ path, body, header string }{
		{"/responses", `{"model":"gpt-4o-mini","input":"Hello, Corral"}`, "Authorization"},
		{"/messages", `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"Hello, Corral"}]}`, "X-Api-Key"},
	} {
		v := DemoKey
		if tt.header == "Authorization" {
			v = "Bearer " + DemoKey
		}
		if code, body := postDemo(t, base+tt.path, tt.body, tt.header, v); code != 200 || !strings.Contains(body, "mock reply to: Hello, Corral") {
			t.Errorf("demo %s = %d %s", tt.path, code, body)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run returned %v after shutdown; want nil", err)
	}
	if strings.Contains(stderr.String(), DemoKey) || strings.Contains(stderr.String(), token) {
		t.Error("logs contain the demo key or the admin token")
	}
	if !strings.Contains(stderr.String(), `"grace":"30s"`) {
		t.Errorf("shutdown log does not give the grace period as 30s:\n%s", stderr)
	}
}

func TestRunRefusesBadConfig(t *testing.T) {
	err := run(context.Background(), nil, []string{"CORRAL_WAIT_TIMEOUT=later"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "CORRAL_WAIT_TIMEOUT") {
		t.Errorf("run error = %v; want one naming CORRAL_WAIT_TIMEOUT", err)
	}
	// A free port, never the default: a test must not collide with a
	// gateway (the README's demo) already serving :8080.
	err = run(context.Background(), nil, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_TENANTS_FILE=/nonexistent/t.yaml"}, io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/t.yaml") {
		t.Errorf("run error = %v; want one naming the tenants file", err)
	}
}

func TestServeDrainsInFlightOnShutdown(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(200)
		_, _ = w.Write([]byte("first "))
		w.(http.Flusher).Flush()
		close(entered)
		<-release
		_, _ = w.Write([]byte("last"))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() {
		served <- serve(ctx, ln, h, httpserve.Drain{Grace: 10 * time.Second}, slog.New(slog.DiscardHandler))
	}()

	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-entered
	cancel() // SIGTERM while a response is mid-stream
	// New connections are refused once shutdown has begun.
	for {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			break
		}
		c.Close()
		time.Sleep(time.Millisecond) // waiting for the listener to close: there is no event to wait on
	}
	close(release)
	if body := <-got; body != "first last" {
		t.Errorf("in-flight response = %q; want it completed", body)
	}
	if err := <-served; err != nil {
		t.Errorf("serve = %v; want nil", err)
	}
}

func TestPprofOnItsOwnAddress(t *testing.T) {
	addr, stop, err := servePprof("127.0.0.1:0", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine profile") {
		t.Errorf("pprof = %d %.80s", resp.StatusCode, body)
	}
	stop()
	if _, _, err := servePprof("not-an-address", slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "CORRAL_PPROF_ADDR") {
		t.Errorf("bad address error = %v; want one naming CORRAL_PPROF_ADDR", err)
	}
}
