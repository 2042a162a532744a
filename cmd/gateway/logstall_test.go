package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// stallWriter passes writes to w until stall is called; from then on each
// write waits until release is.
type stallWriter struct {
	w       io.Writer
	mu      sync.Mutex    // protects stalled
	stalled chan struct{} // non-nil while stalled; closed by release
	entered chan struct{} // receives when a write starts waiting
}

func (s *stallWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	ch := s.stalled
	s.mu.Unlock()
	if ch != nil {
		select {
		case s.entered <- struct{}{}:
		default:
		}
		<-ch
	}
	return s.w.Write(p)
}

func (s *stallWriter) stall() {
	s.mu.Lock()
	s.stalled = make(chan struct{})
	s.mu.Unlock()
}

func (s *stallWriter) release() {
	s.mu.Lock()
	close(s.stalled)
	s.stalled = nil
	s.mu.Unlock()
}

// startStallable runs the demo gateway until ctx ends, with env added,
// its log going through a stallWriter to lines; it returns once the
// gateway listens, with its base URL and run's result to come on done.
// stallAdmin is the admin token of the stallable gateways.
const stallAdmin = "stall-admin"

func startStallable(ctx context.Context, t *testing.T, env ...string) (base string, lines *lineWriter, stderr *stallWriter, done chan error) {
	t.Helper()
	stdout := newLineWriter()
	lines = newLineWriter()
	stderr = &stallWriter{w: lines, entered: make(chan struct{}, 1)}
	done = make(chan error, 1)
	env = append([]string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + t.TempDir(), "CORRAL_ADMIN_TOKEN=" + stallAdmin}, env...)
	go func() { done <- run(ctx, []string{"-demo"}, env, stdout, stderr) }()
	base = stdout.waitFor(t, regexp.MustCompile(`base URL: (http://\S+)/v1`))[1]
	lines.waitFor(t, regexp.MustCompile(`corral listening`))
	return base, lines, stderr, done
}

// A log reader that stops reading (a stuck pipe) costs log lines, counted
// in corral_log_lines_dropped_total, never a request: every request is
// answered while stderr takes nothing, and the lines still pending are
// written on shutdown.
func TestStalledLogNeverBlocksRequests(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	base, lines, stderr, done := startStallable(ctx, t)

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer client.CloseIdleConnections()
	chat := func() int {
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"log stall"}]}`))
		req.Header.Set("Authorization", "Bearer "+DemoKey)
		resp, err := client.Do(req)
		if err != nil {
			t.Error(err)
			return 0
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	dropped := func() float64 {
		req, _ := http.NewRequest(http.MethodGet, base+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+stallAdmin) // the admin token guards /metrics
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		m := regexp.MustCompile(`(?m)^corral_log_lines_dropped_total (\S+)$`).FindSubmatch(b)
		if m == nil {
			t.Fatalf("/metrics has no corral_log_lines_dropped_total")
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		return v
	}
	if d := dropped(); d != 0 {
		t.Fatalf("corral_log_lines_dropped_total = %v before the stall; want 0", d)
	}

	stderr.stall()
	if code := chat(); code != 200 {
		t.Fatalf("first request during the stall = %d", code)
	}
	<-stderr.entered // the sink's writer is stuck in stderr from here on

	// Access lines are about 300 bytes and the sink holds 1 MiB: some
	// thousands of requests fill it. Each must still be answered.
	const workers, max = 8, 20000
	var wg sync.WaitGroup
	var mu sync.Mutex // protects sent, failed
	sent, failed := 0, 0
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				if sent >= max || failed > 0 {
					mu.Unlock()
					return
				}
				sent++
				n := sent
				mu.Unlock()
				if code := chat(); code != 200 {
					mu.Lock()
					failed++
					mu.Unlock()
				}
				if n%500 == 0 && dropped() > 0 {
					mu.Lock()
					sent = max
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if failed > 0 {
		t.Fatalf("%d requests failed while the log was stalled", failed)
	}
	if d := dropped(); d == 0 {
		t.Fatalf("corral_log_lines_dropped_total = 0 after %d requests with stderr stalled; want lines dropped", sent)
	}

	stderr.release()
	// The sink drains what it holds once stderr takes again; a line logged
	// while it is still full is dropped like any other. Shutdown begins
	// once a line logged after the release has been written, so the
	// shutdown line below finds room, as it would after any stall.
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; ; i++ {
		id := fmt.Sprintf("after-release-%d", i)
		req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"log stall"}]}`))
		req.Header.Set("Authorization", "Bearer "+DemoKey)
		req.Header.Set("X-Request-Id", id)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		if strings.Contains(lines.String(), `"request_id":"`+id+`"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no line logged after the release was written within 10 s")
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run = %v after shutdown", err)
	}
	// Written on shutdown, after the stall: nothing pending was lost.
	if !strings.Contains(lines.String(), `"msg":"shutting down"`) {
		t.Errorf("the shutdown line was not written before run returned")
	}
}

// A log reader that never reads again must not keep the process alive:
// after SIGTERM, run returns once the shutdown's deadline has passed
// (CORRAL_SHUTDOWN_TIMEOUT), giving up on the lines stderr did not take.
func TestStuckLogDoesNotHoldShutdown(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, _, stderr, done := startStallable(ctx, t, "CORRAL_SHUTDOWN_TIMEOUT=1s")
	stderr.stall()
	defer stderr.release() // lets the sink's writer, stuck past run's end, exit
	cancel()
	<-stderr.entered // the shutdown's own line is stuck in stderr

	// The shutdown deadline is 1 s; 10 s is a bound that only a process
	// held by its log can miss.
	limit := time.NewTimer(10 * time.Second)
	defer limit.Stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run = %v after shutdown", err)
		}
	case <-limit.C:
		t.Fatal("run did not return within 10 s of SIGTERM with a 1 s shutdown timeout while stderr took nothing")
	}
}
