// Package redistest starts a real, private redis-server for tests.
//
// Every behaviour Corral claims about Redis (locks, pub/sub, rate limits,
// outages) is tested against a real server, never an in-memory fake. Each
// call to Start runs its own redis-server on a free loopback port with no
// persistence, so parallel test binaries never share state and no test has
// to flush a shared database.
//
// When redis-server is not installed the test fails under `make test` and
// CI=true, and is skipped under a bare `go test` (internal/testdeps), so a
// missing server can never turn into a green `make test`.
// CORRAL_TEST_REDIS_URL points the tests at an existing server instead; such
// a server cannot be stopped by Stop, so outage tests skip on it.
package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/testdeps"
)

// Server is one redis-server owned by a test.
type Server struct {
	tb   testing.TB
	bin  string
	port int
	url  string

	// persist are the persistence flags (StartAOF); nil: none.
	persist []string

	mu  sync.Mutex // protects cmd
	cmd *exec.Cmd  // nil while stopped or when external
}

// Start launches a redis-server on a free loopback port and registers its
// shutdown with tb.Cleanup.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return start(tb, nil)
}

// StartAOF is Start with an append-only file fsynced on every write, in a
// directory of the test's: Restart then starts the server again from that
// file, as a production Redis restarts (the shipped compose's setting,
// with fsync always so the test loses nothing to timing).
func StartAOF(tb testing.TB) *Server {
	tb.Helper()
	if os.Getenv("CORRAL_TEST_REDIS_URL") != "" {
		tb.Skip("redistest: an external CORRAL_TEST_REDIS_URL server cannot be restarted from its AOF")
	}
	return start(tb, []string{"--appendonly", "yes", "--appendfsync", "always", "--dir", tb.TempDir()})
}

func start(tb testing.TB, persist []string) *Server {
	tb.Helper()
	if u := os.Getenv("CORRAL_TEST_REDIS_URL"); u != "" {
		return &Server{tb: tb, url: u}
	}
	bin := lookPaths(tb, " (or set CORRAL_TEST_REDIS_URL to a running server)", "redis-server")[0]
	s := &Server{tb: tb, bin: bin, persist: persist}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s.port = freePort(tb)
		s.url = fmt.Sprintf("redis://127.0.0.1:%d/0", s.port)
		if lastErr = s.launch(); lastErr == nil {
			tb.Cleanup(s.Stop)
			return s
		}
	}
	tb.Fatalf("redistest: start redis-server: %v", lastErr)
	return nil
}

// Client starts a redis-server for tb alone, as Start does, and returns a
// client of it: the whole setup of a test that only talks to Redis and
// never stops it or hands its URL on.
func Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return Start(tb).Client()
}

// URL is the redis:// URL of the server, as CORRAL_REDIS_URL takes it.
func (s *Server) URL() string { return s.url }

// Addr is host:port of the server.
func (s *Server) Addr() string {
	opt, err := redis.ParseURL(s.url)
	if err != nil {
		s.tb.Fatalf("redistest: parse url: %v", err)
	}
	return opt.Addr
}

// Client returns a new client for the server, closed at test cleanup.
func (s *Server) Client() *redis.Client {
	opt, err := redis.ParseURL(s.url)
	if err != nil {
		s.tb.Fatalf("redistest: parse url: %v", err)
	}
	c := redis.NewClient(opt)
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Stop kills the server (an outage). It is safe to call twice.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	_ = s.cmd.Process.Kill()
	_ = s.cmd.Wait()
	s.cmd = nil
}

// Pause stops the server with SIGSTOP: it keeps its port and the kernel
// still completes TCP handshakes, but it answers nothing (a hung Redis).
// Resume, Stop and the test's cleanup undo it.
func (s *Server) Pause() {
	s.tb.Helper()
	s.signal(syscall.SIGSTOP)
}

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() {
	s.tb.Helper()
	s.signal(syscall.SIGCONT)
}

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		s.tb.Skip("redistest: cannot signal an external or stopped server")
	}
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.tb.Fatalf("redistest: %v: %v", sig, err)
	}
}

// Restart starts the server again on the same port after Stop: empty, or
// from its append-only file for a server of StartAOF.
func (s *Server) Restart() {
	s.tb.Helper()
	if s.bin == "" {
		s.tb.Skip("redistest: cannot restart an external CORRAL_TEST_REDIS_URL server")
	}
	var err error
	for attempt := 0; attempt < 50; attempt++ {
		if err = s.launch(); err == nil {
			return
		}
		time.Sleep(20 * time.Millisecond) // the old socket may linger briefly
	}
	s.tb.Fatalf("redistest: restart: %v", err)
}

// Stoppable reports whether Stop and Restart control this server.
func (s *Server) Stoppable() bool { return s.bin != "" }

func (s *Server) launch() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--loglevel", "warning",
	}
	cmd := exec.Command(s.bin, append(args, s.persist...)...)
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := waitReady(s.url, cmd); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	s.mu.Lock()
	s.cmd = cmd
	s.mu.Unlock()
	return nil
}

// startReady starts the process newCmd builds for a free loopback port (a
// redis-server node or Sentinel) and returns its host:port once it answers
// as itself. A port taken before the process bound it, or a process that
// exited during start, gets a new port, up to five times; after that the
// test fails. The caller keeps the returned cmd to kill it.
func startReady(tb testing.TB, newCmd func(port int) *exec.Cmd) (string, *exec.Cmd) {
	tb.Helper()
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		port := freePort(tb)
		cmd := newCmd(port)
		if err = cmd.Start(); err != nil {
			tb.Fatalf("redistest: start %s: %v", cmd.Path, err)
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		if err = waitReady("redis://"+addr, cmd); err == nil {
			return addr, cmd
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	tb.Fatalf("redistest: %v", err)
	return "", nil
}

// waitReady polls PING until the new server answers; the process gives no
// other readiness signal. It gives up early when the process has exited
// (for example because the port was taken).
func waitReady(url string, cmd *exec.Cmd) error {
	opt, err := redis.ParseURL(url)
	if err != nil {
		return err
	}
	opt.MaxRetries = -1
	c := redis.NewClient(opt)
	defer c.Close()
	for i := 0; i < 500; i++ {
		if cmd.Process.Signal(syscall.Signal(0)) != nil {
			return fmt.Errorf("redis-server on %s exited during start", opt.Addr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		var pid int
		pid, err = serverPID(ctx, c)
		cancel()
		if err == nil {
			if pid != cmd.Process.Pid {
				// Another test binary's server took the port between
				// freePort and this start; answering its PING would make
				// two tests share one Redis.
				return fmt.Errorf("%w: %s answers as pid %d, not %d", errPortTaken, opt.Addr, pid, cmd.Process.Pid)
			}
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s not ready: %w", opt.Addr, err)
}

// errPortTaken says a free port was taken by another server before ours
// bound it; the caller picks another port.
var errPortTaken = errors.New("redistest: port taken by another server")

// serverPID asks the server on c for its process id (INFO server), which
// both redis-server and Sentinel report, so a caller can tell its own
// process from another one listening on the same port.
func serverPID(ctx context.Context, c *redis.Client) (int, error) {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			return strconv.Atoi(v)
		}
	}
	return 0, errors.New("redistest: INFO server has no process_id")
}

// freePort is a loopback port nothing listens on right now; failing to
// find one fails the test.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("redistest: free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// lookPaths finds each of names on PATH. A missing one fails the test
// under `make test` and CI, where the servers must be installed, and skips
// it elsewhere, saying hint (testdeps.Missing).
func lookPaths(tb testing.TB, hint string, names ...string) []string {
	tb.Helper()
	paths := make([]string, len(names))
	for i, name := range names {
		p, err := exec.LookPath(name)
		if err != nil {
			testdeps.Missing(tb, "redistest: "+name, hint)
			return nil
		}
		paths[i] = p
	}
	return paths
}

// killAll kills and reaps every process of cmds still running (a nil
// entry is one a test already killed; one without a Process never started).
func killAll(cmds []*exec.Cmd) {
	for _, cmd := range cmds {
		if cmd == nil || cmd.Process == nil {
			continue
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}
