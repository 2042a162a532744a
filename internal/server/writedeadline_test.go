package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requestLines is a log sink that hands over the X-Request-Id of every
// access-log line, so a test can wait for a handler to return.
type requestLines chan string

func (c requestLines) Write(p []byte) (int, error) {
	for line := range bytes.Lines(p) {
		if i := bytes.Index(line, []byte(`"request_id":"`)); i >= 0 && bytes.Contains(line, []byte(`"path":"/v1/`)) {
			id, _, _ := bytes.Cut(line[i+len(`"request_id":"`):], []byte(`"`))
			select {
			case c <- string(id):
			default:
			}
		}
	}
	return len(p), nil
}

// tinySendBuffers gives every accepted connection a 16 KiB send buffer
// (no autotuning), for the same reason.
type tinySendBuffers struct{ net.Listener }

func (l tinySendBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(16 << 10)
	}
	return c, err
}

// dialTiny connects with a 4 KiB receive buffer, so a large answer cannot
// hide in the kernel's socket buffers while the client reads nothing.
func dialTiny(t *testing.T, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestClientsThatNeverReadAreDropped holds fault 5 of issue 13: a
// non-streamed answer had no write deadline, so a client that never read a
// large cached answer pinned its handler and the answer's memory for as
// long as it kept the connection. Raw TCP clients ask for a 1 MB answer
// (a HIT and a MISS) and read nothing; every handler must return within
// the write stall, and the clients must find their answers cut.
func TestClientsThatNeverReadAreDropped(t *testing.T) {
	done := make(requestLines, 64)
	h := newHarness(t, func(o *harnessOptions) {
		o.logs = done
		o.maxBody = 32 << 20
		o.wrapListener = func(l net.Listener) net.Listener { return tinySendBuffers{l} }
		o.server = func(so *Options) { so.WriteStall = 300 * time.Millisecond }
	})
	reply := strings.Repeat("corral ", 1<<20/7)
	body := func(n int) string {
		return fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"big %d"}],"mock":{"reply":%q}}`, n, reply)
	}
	// Store one answer for the HITs.
	if a := send(context.Background(), h.gw.URL, acmeKey, body(0)); a.status != 200 || len(a.body) < len(reply) {
		t.Fatalf("storing the answer: %d, %d bytes", a.status, len(a.body))
	}
	<-done

	const clients = 6
	addr := strings.TrimPrefix(h.gw.URL, "http://")
	conns := make([]net.Conn, clients)
	for i := range conns {
		n := 0 // HITs on the stored answer
		if i%2 == 1 {
			n = i // MISSes: each a new answer relayed from the flight
		}
		b := body(n)
		conns[i] = dialTiny(t, addr)
		fmt.Fprintf(conns[i], "POST /v1/chat/completions HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\r\n"+
			"Content-Type: application/json\r\nX-Request-Id: stalled-%d\r\nContent-Length: %d\r\n\r\n%s", acmeKey, i, len(b), b)
	}

	// Every handler returns although no client reads.
	timeout := time.After(20 * time.Second)
	for seen := 0; seen < clients; {
		select {
		case id := <-done:
			if strings.HasPrefix(id, "stalled-") {
				seen++
			}
		case <-timeout:
			t.Fatalf("%d of %d handlers still blocked on clients that do not read", clients-seen, clients)
		}
	}

	// What the clients can still read is a cut answer.
	for i, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			continue // cut before the headers were out
		}
		got, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && got == resp.ContentLength {
			t.Errorf("client %d read a complete %d-byte answer; want it cut", i, got)
		}
	}
}

// TestSlowReadersAreNotDropped: the stall deadline is per write of at most
// stallChunk, so a client that reads a large answer slowly but steadily,
// taking many stalls' time in all, still gets all of it.
func TestSlowReadersAreNotDropped(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.maxBody = 32 << 20
		o.wrapListener = func(l net.Listener) net.Listener { return tinySendBuffers{l} }
		o.server = func(so *Options) { so.WriteStall = 300 * time.Millisecond }
	})
	reply := strings.Repeat("corral ", 1<<20/7)
	b := fmt.Sprintf(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"slow"}],"mock":{"reply":%q}}`, reply)
	if a := send(context.Background(), h.gw.URL, acmeKey, b); a.status != 200 {
		t.Fatalf("storing the answer: %d", a.status)
	}
	c := dialTiny(t, strings.TrimPrefix(h.gw.URL, "http://"))
	fmt.Fprintf(c, "POST /v1/chat/completions HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\r\n"+
		"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", acmeKey, len(b), b)
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	start := time.Now()
	var got int64
	buf := make([]byte, 32<<10)
	// Reads return at most the 4 KiB window: one per 5 ms is ~800 KB/s,
	// above the 64 KiB per 300 ms stall (213 KB/s) a reader must keep up,
	// and 1 MB takes longer than two stalls.
	pace := time.NewTicker(5 * time.Millisecond)
	defer pace.Stop()
	for {
		n, err := resp.Body.Read(buf)
		got += int64(n)
		if err != nil {
			if err != io.EOF {
				t.Fatalf("slow reader cut after %d of %d bytes, %v: %v", got, resp.ContentLength, time.Since(start), err)
			}
			break
		}
		<-pace.C
	}
	if got != resp.ContentLength || time.Since(start) < 600*time.Millisecond {
		t.Errorf("read %d of %d bytes in %v; want all of it, over more than two stalls", got, resp.ContentLength, time.Since(start))
	}
}
