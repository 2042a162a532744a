package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the harness started and must stop.
type proc struct {
	name string
	addr string // host:port it serves on
	// pprofAddr is a gateway's CORRAL_PPROF_ADDR (-pprof), or a profiled
	// floor's (footprint), else "".
	pprofAddr string
	cpu       int // CPU it is pinned to, -1 when not pinned
	cmd       *exec.Cmd
	out       *tailBuffer // last bytes of stdout and stderr, for error messages

	done chan struct{} // closed when the process has exited
	err  error         // Wait's result; valid once done is closed
}

// pid is the process id. With taskset in front the pid is still the
// child's own: taskset execs it.
func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// procs owns every child process of one harness run.
type procs struct {
	pin *pinner

	mu   sync.Mutex // protects list
	list []*proc
}

// start launches path with args and env, pinned to cpu when pinning is on
// (cpu < 0: never pinned). Each child gets its own process group, so stop
// reaches anything it forks, and Pdeathsig, so it dies with the harness
// even when the harness itself is killed.
func (ps *procs) start(name, addr string, cpu int, env []string, path string, args ...string) (*proc, error) {
	argv := append([]string{path}, args...)
	pinned := -1
	if cpu >= 0 && ps.pin.enabled() {
		argv = append([]string{ps.pin.taskset, "-c", strconv.Itoa(cpu)}, argv...)
		pinned = cpu
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	out := &tailBuffer{max: 8 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, addr: addr, cpu: pinned, cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	ps.mu.Lock()
	ps.list = append(ps.list, p)
	ps.mu.Unlock()
	return p, nil
}

// stop ends p: SIGTERM to its process group, SIGKILL after grace.
func (ps *procs) stop(p *proc, grace time.Duration) {
	if !p.exited() {
		_ = syscall.Kill(-p.pid(), syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(grace):
			_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
			<-p.done
		}
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	for i, q := range ps.list {
		if q == p {
			ps.list = append(ps.list[:i], ps.list[i+1:]...)
			break
		}
	}
}

// stopAll stops every child still running, newest first (gateways before
// the Redis and mock they use), all in parallel.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	list := append([]*proc(nil), ps.list...)
	ps.mu.Unlock()
	var wg sync.WaitGroup
	for i := len(list) - 1; i >= 0; i-- {
		wg.Go(func() { ps.stop(list[i], 2*time.Second) })
	}
	wg.Wait()
}

// waitHTTP polls url until it answers 200, p exits or timeout passes.
func waitHTTP(ctx context.Context, p *proc, url string, timeout time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if p.exited() {
			return fmt.Errorf("%s exited before it was ready (%v): %s", p.name, p.err, p.out.String())
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if resp, err := c.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return fmt.Errorf("%s not ready at %s after %v: %s", p.name, url, timeout, p.out.String())
}

// freeAddr returns a loopback address with a port that was free a moment
// ago. Starting a server on it can still race another process; callers
// retry a start that fails.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := ln.Addr().String()
	return addr, ln.Close()
}

// childEnv is the harness's environment without CORRAL_* and MOCKLLM_*
// settings, so a developer's shell cannot change what is measured, plus
// extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "CORRAL_") || strings.HasPrefix(kv, "MOCKLLM_") || strings.HasPrefix(kv, roleEnv+"=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int

	mu  sync.Mutex // protects buf
	buf []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - t.max; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return "(no output)"
	}
	return s
}

// rssKiB reads VmRSS of pid from /proc.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			f := strings.Fields(v) // "12345 kB"
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, errors.New("VmRSS not found")
}

// clockTick is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux the harness runs on; reading it properly needs
// cgo (sysconf).
const clockTick = 100

// cpuTime reads the user+system CPU time of pid from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may contain spaces; fields after its
	// closing parenthesis are fixed. utime and stime are fields 14 and 15.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("malformed stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTick, nil
}

// selfCPUTime is the harness's own user+system CPU time.
func selfCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
