package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// rssMiB is the process's resident set (VmRSS), in MiB.
func rssMiB(t *testing.T, pid int) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")))
			if err != nil {
				t.Fatalf("VmRSS %q: %v", v, err)
			}
			return float64(kb) / 1024
		}
	}
	t.Fatal("no VmRSS in /proc status")
	return 0
}

// TestClientsThatNeverReadCostNoCopy holds issue 33 point 18 on real
// gateway processes, embedded and on a real redis-server: 30 clients
// that ask for a 4 MiB cached answer, as JSON and as a replayed stream,
// and never read it raised the gateway's RSS by 133 MiB (Redis) and 228
// to 327 MiB (streamed), a copy or two per client. Each client reads the
// answer's headers through a 4 KiB receive buffer and stops; the RSS must
// grow by less than 10 copies' worth.
func TestClientsThatNeverReadCostNoCopy(t *testing.T) {
	const (
		size    = 4 << 20
		clients = 30
		bound   = 40.0 // MiB; the copies were 120 MiB and more
	)
	answer := fmt.Sprintf(`{"id":"chatcmpl-big","object":"chat.completion","created":1,"model":"gpt-4o-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, strings.Repeat("corral ", size/7))
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(up.Close)
	file := writeTenantsFile(t, tenantYAML("proc", tenant.HashKey("sk-proc")))
	bin := buildGateway(t)
	tests := []struct {
		name   string
		redis  bool
		stream bool
	}{
		{"embedded", false, false},
		{"embedded/stream", false, true},
		{"redis", true, false},
		{"redis/stream", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := []string{"CORRAL_UPSTREAM_URL=" + up.URL + "/v1", "CORRAL_TENANTS_FILE=" + file, "CORRAL_DATA_DIR=" + t.TempDir()}
			if tt.redis {
				env = append(env, "CORRAL_REDIS_URL="+redistest.Start(t).URL())
			}
			base, cmd := startGateway(t, bin, env)
			for want := range strings.SplitSeq("MISS HIT", " ") { // store it, then a reading HIT warms the path
				if code, cache, err := postChat(base, "sk-proc", "big"); err != nil || code != 200 || cache != want {
					t.Fatalf("reading client: %d %q %v; want 200 %s", code, cache, err, want)
				}
			}
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"big"}]}`
			if tt.stream {
				body = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"big"}]}`
			}
			before := rssMiB(t, cmd.Process.Pid)
			d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
				return rc.Control(func(fd uintptr) { _ = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
			}}
			for i := range clients {
				c, err := d.Dial("tcp", strings.TrimPrefix(base, "http://"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Close() })
				fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer sk-proc\r\n"+
					"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
				_ = c.SetReadDeadline(time.Now().Add(time.Minute))
				resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
				if err != nil {
					t.Fatalf("client %d: %v", i, err)
				}
				if resp.StatusCode != 200 || resp.Header.Get("X-Corral-Cache") != "HIT" {
					t.Fatalf("client %d: %d %q; want a 200 HIT", i, resp.StatusCode, resp.Header.Get("X-Corral-Cache"))
				}
			}
			grew := rssMiB(t, cmd.Process.Pid) - before
			t.Logf("RSS %.1f MiB, %+.1f MiB with %d clients stalled on a %d MiB hit", before, grew, clients, size>>20)
			if grew > bound {
				t.Errorf("%d clients that never read a %d MiB hit grew the RSS by %.1f MiB; want under %.0f MiB", clients, size>>20, grew, bound)
			}
		})
	}
}
