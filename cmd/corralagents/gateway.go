package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// demoKey is the tenant key of `gateway -demo`.
const demoKey = "sk-corral-demo"

// accessLine is what the checks read of one gateway access log line.
type accessLine struct {
	Msg    string `json:"msg"`
	Method string `json:"method"`
	Path   string `json:"path"`
	Status int    `json:"status"`
	Cache  string `json:"cache"`
	Model  string `json:"model"`
}

// gateway is a running `gateway -demo` process.
type gateway struct {
	base string // e.g. http://127.0.0.1:40123, without /v1
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited and its log is read

	mu    sync.Mutex   // guards lines
	lines []accessLine // access lines so far, in order
}

// buildGateway builds ./cmd/gateway into dir and returns the binary's path.
func buildGateway(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "gateway")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build gateway: %w", err)
	}
	return bin, nil
}

// startGateway starts bin -demo on a free port of 127.0.0.1 and waits for
// the base URL it prints. Its JSON log is read for access lines, and
// copied to logw.
func startGateway(ctx context.Context, bin string, logw io.Writer) (*gateway, error) {
	cmd := exec.Command(bin, "-demo")
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "CORRAL_ADDR=127.0.0.1:0", "CORRAL_LOG_LEVEL=info"}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("gateway: start: %w", err)
	}
	g := &gateway{cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(g.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			fmt.Fprintln(logw, sc.Text())
			var l accessLine
			if json.Unmarshal(sc.Bytes(), &l) == nil && l.Msg == "request" {
				g.mu.Lock()
				g.lines = append(g.lines, l)
				g.mu.Unlock()
			}
		}
		_ = cmd.Wait()
	}()

	base := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if u, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "base URL:"); ok {
				base <- strings.TrimSuffix(strings.TrimSpace(u), "/v1")
			}
		}
	}()
	select {
	case g.base = <-base:
		return g, nil
	case <-g.done:
		return nil, errors.New("gateway: exited before it listened")
	case <-time.After(30 * time.Second):
		g.stop()
		return nil, errors.New("gateway: no base URL within 30s")
	case <-ctx.Done():
		g.stop()
		return nil, ctx.Err()
	}
}

// mark is the number of access lines so far; since(mark) is the lines after it.
func (g *gateway) mark() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.lines)
}

func (g *gateway) since(mark int) []accessLine {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]accessLine(nil), g.lines[mark:]...)
}

// stop ends the gateway with SIGTERM and waits for it.
func (g *gateway) stop() {
	_ = g.cmd.Process.Signal(os.Interrupt)
	select {
	case <-g.done:
	case <-time.After(15 * time.Second):
		_ = g.cmd.Process.Kill()
		<-g.done
	}
}
