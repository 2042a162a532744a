package main

import (
	"bufio"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// buildGateway compiles this command into a temporary binary, so tests can
// run real gateway processes and kill them.
func buildGateway(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	out, err := exec.Command(goBin, "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// startGateway runs the binary with env and waits until it answers.
func startGateway(t *testing.T, bin string, env []string) (base string, cmd *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd = exec.Command(bin)
	cmd.Env = append(append(os.Environ(), env...), "CORRAL_ADDR="+addr, "CORRAL_LOG_LEVEL=error")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_, _ = cmd.Process.Wait()
	})
	base = "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			return base, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway at %s never answered: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond) // a starting process gives no readiness event
	}
}

// streamLines reads one streaming request's data lines into a channel.
func streamLines(t *testing.T, base, body string) <-chan string {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-proc")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
				out <- data
			}
		}
	}()
	return out
}

// TestKilledLeaderInstance kills the process that leads a live stream
// mid-answer: the follower on another gateway process must end its
// stream with an error event once the dead leader's lock lapses, not hang.
func TestKilledLeaderInstance(t *testing.T) {
	rs := redistest.Start(t)
	mock := serveMock(t, mockllm.Options{StreamChunks: 20, ChunkDelay: 100 * time.Millisecond})
	file := writeTenantsFile(t, tenantYAML("proc", tenant.HashKey("sk-proc")))
	bin := buildGateway(t)
	env := []string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + mock.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_LOCK_TTL=1s",
	}
	leaderBase, leaderCmd := startGateway(t, bin, env)
	followerBase, _ := startGateway(t, bin, env)

	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"the leader process is killed"}]}`
	leader := streamLines(t, leaderBase, body)
	for content := 0; content < 3; {
		line, ok := <-leader
		if !ok {
			t.Fatal("leader stream ended early")
		}
		if strings.Contains(line, `"content":"`) && !strings.Contains(line, `"content":""`) {
			content++
		}
	}
	follower := streamLines(t, followerBase, body)
	first, ok := <-follower
	if !ok {
		t.Fatal("follower stream ended before its first event")
	}
	_ = leaderCmd.Process.Kill() // the leader's instance dies mid-stream

	var last string
	lines := 1
	for line := range follower {
		last = line
		lines++
	}
	if !strings.Contains(last, `"code":"upstream_error"`) {
		t.Errorf("follower's stream ended with %q (after %d events, first %q); want an error event", last, lines, first)
	}
	if lines >= 23 {
		t.Errorf("follower got %d events; the leader died before the 20 chunks were out", lines)
	}
}
