package server

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/redistest"
)

// What a Redis-mode leader waits for before its upstream call is what its
// client's first byte waits for: these tests pin it.

// monitor watches every command a test's own redis-server executes
// (MONITOR, on a plain connection: the replies are one line each), and
// lets a test mark a point in that sequence with an ECHO.
type monitor struct {
	rdb   *redis.Client // marks
	lines chan string
}

func startMonitor(tb testing.TB, rs *redistest.Server) *monitor {
	tb.Helper()
	conn, err := net.Dial("tcp", rs.Addr())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = conn.Close() })
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		tb.Fatal(err)
	}
	r := bufio.NewReader(conn)
	if l, err := r.ReadString('\n'); err != nil || l != "+OK\r\n" {
		tb.Fatalf("MONITOR = %q, %v", l, err)
	}
	m := &monitor{rdb: rs.Client(), lines: make(chan string, 4096)}
	go func() { // ends when the connection is closed at cleanup
		defer close(m.lines)
		for {
			l, err := r.ReadString('\n')
			if err != nil {
				return
			}
			m.lines <- strings.TrimSuffix(l, "\r\n")
		}
	}()
	return m
}

// mark puts name into the monitored sequence: every command Redis
// answered before it comes before it.
func (m *monitor) mark(tb testing.TB, name string) {
	if err := m.rdb.Echo(context.Background(), name).Err(); err != nil {
		tb.Error(err)
	}
}

// until returns the monitored lines up to the mark name (exclusive);
// ok=false if it did not come within wait.
func (m *monitor) until(tb testing.TB, name string, wait time.Duration) (lines []string, ok bool) {
	tb.Helper()
	t := time.NewTimer(wait)
	defer t.Stop()
	for {
		select {
		case l, open := <-m.lines:
			if !open {
				return lines, false
			}
			if strings.Contains(l, `"echo" "`+name+`"`) {
				return lines, true
			}
			lines = append(lines, l)
		case <-t.C:
			return lines, false
		}
	}
}

// commandsOn are the commands of lines that name the prompt's keys, in
// order, as sent by a client: the commands a script runs inside Redis
// ("[0 lua]") are not round trips.
func commandsOn(lines []string, hash string) []string {
	var out []string
	for _, l := range lines {
		if !strings.Contains(l, hash) || strings.Contains(l, " lua]") {
			continue
		}
		_, rest, ok := strings.Cut(l, `] "`)
		if !ok {
			continue
		}
		name, _, _ := strings.Cut(rest, `"`)
		out = append(out, strings.ToLower(name))
	}
	return out
}

// TestRedisTripsBeforeUpstreamCall counts the Redis commands a miss makes
// on its prompt's keys before its upstream call starts. A streaming miss
// makes one: the acquire-or-read script, which is both its lookup and its
// lock. A plain miss reads first (so that a hit never joins a flight or
// runs the script) and a streaming miss of a tenant with
// stale_while_revalidate reads first too (for the stale entry).
func TestRedisTripsBeforeUpstreamCall(t *testing.T) {
	var mon *monitor
	marks := make(chan struct{}, 8) // one per upstream request, after its mark
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.tenants = append(o.tenants, staleTenant)
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if mon != nil {
					mon.mark(t, "upstream-call")
					marks <- struct{}{}
				}
				next.ServeHTTP(w, r)
			})
		}
	})
	// Load the script into this Redis first: the very first run of a
	// script is an EVALSHA answered NOSCRIPT, then an EVAL.
	if a := send(context.Background(), h.gw.URL, acmeKey, chatBody("load the scripts")); a.status != 200 {
		t.Fatalf("warm-up: %d %s", a.status, a.body)
	}
	mon = startMonitor(t, rs)

	tests := []struct {
		name   string
		give   string // the body
		key    string // the tenant's API key
		tenant string
		want   []string
	}{
		{"streaming miss", liveBody("one trip before the call"), acmeKey, "acme", []string{"evalsha"}},
		{"plain miss", chatBody("a lookup, then the lock"), acmeKey, "acme", []string{"mget", "evalsha"}},
		{"streaming miss, stale_while_revalidate", liveBody("the stale read first"), staleKey, "stale", []string{"mget", "evalsha"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mon.mark(t, "request")
			if _, ok := mon.until(t, "request", 5*time.Second); !ok {
				t.Fatal("the request mark never came")
			}
			a := send(context.Background(), h.gw.URL, tt.key, tt.give)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
				t.Fatalf("answer: %d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			<-marks
			lines, ok := mon.until(t, "upstream-call", 5*time.Second)
			if !ok {
				t.Fatal("the upstream mark never came")
			}
			if got := commandsOn(lines, promptHash(t, tt.tenant, tt.give)); !slices.Equal(got, tt.want) {
				t.Errorf("commands before the upstream call = %q; want %q", got, tt.want)
			}
		})
	}
}

// holdFirstEvent is a listener whose connections hold their first write
// of an event (a "data: " line) until release is closed, after closing
// writing.
type holdFirstEvent struct {
	net.Listener
	once             *sync.Once
	writing, release chan struct{}
}

func (l holdFirstEvent) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return holdConn{Conn: c, l: l}, nil
}

type holdConn struct {
	net.Conn
	l holdFirstEvent
}

func (c holdConn) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "data: ") {
		c.l.once.Do(func() {
			close(c.l.writing)
			<-c.l.release
		})
	}
	return c.Conn.Write(p)
}

// holdAfterFirst is an upstream response writer that holds every event
// after the first until more is closed.
type holdAfterFirst struct {
	http.ResponseWriter
	events int
	more   <-chan struct{}
}

func (w *holdAfterFirst) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "data: ") {
		if w.events++; w.events == 2 {
			<-w.more
		}
	}
	return w.ResponseWriter.Write(p)
}

func (w *holdAfterFirst) Flush() { http.NewResponseController(w.ResponseWriter).Flush() }

func (w *holdAfterFirst) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// TestLeaderClientWrittenBeforeLiveStream checks that a Redis-mode
// leader's first event reaches its client before the live stream for the
// other instances gets it: while the client's first write is held, with
// the upstream holding its second event, nothing is in the live stream;
// once the write is out, the live stream has every event, in the order
// the client got them (and the usage chunk the client did not ask for).
func TestLeaderClientWrittenBeforeLiveStream(t *testing.T) {
	writing, release, more := make(chan struct{}), make(chan struct{}), make(chan struct{})
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.mock.StreamChunks = 3
		o.wrapListener = func(l net.Listener) net.Listener {
			return holdFirstEvent{Listener: l, once: new(sync.Once), writing: writing, release: release}
		}
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				next.ServeHTTP(&holdAfterFirst{ResponseWriter: w, more: more}, r)
			})
		}
	})
	body := liveBody("the client first, then Redis")
	stream := keying.Name("acme", promptHash(t, "acme", body), keying.Stream)
	rdb := rs.Client()
	ctx := context.Background()

	c := openStream(t, h.gw.URL, acmeKey, body)
	<-writing // the leader's relay is writing the first event to its client
	if n, err := rdb.Exists(ctx, stream).Result(); err != nil || n != 0 {
		t.Errorf("live stream exists while the client's first write is held (EXISTS = %d, %v)", n, err)
	}
	close(release)
	first := <-c.events
	// The first event is published once the client has it.
	got, err := rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{stream, "0"}, Count: 1, Block: 10 * time.Second}).Result()
	if err != nil || len(got) != 1 || len(got[0].Messages) != 1 {
		t.Fatalf("XREAD of the live stream = %v, %v", got, err)
	}
	close(more)
	events := []string{first.data}
	for ev := range c.events {
		events = append(events, ev.data)
	}
	if len(events) < 3 || events[len(events)-1] != "[DONE]" {
		t.Fatalf("client events = %q", events)
	}
	// Every event the client got is in the live stream, in that order,
	// then its clean end (written before the flight ends).
	waitFlights(t, h)
	msgs, err := rdb.XRange(ctx, stream, "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	var published []string
	for _, m := range msgs {
		ev, ok := m.Values["e"].(string)
		if !ok || strings.Contains(ev, `"choices":[]`) {
			continue // the usage chunk Corral asked for, hidden from this client
		}
		published = append(published, strings.TrimSuffix(strings.TrimPrefix(ev, "data: "), "\n\n"))
	}
	if !slices.Equal(published, events) {
		t.Errorf("live stream events = %q; want the client's %q", published, events)
	}
	if last := msgs[len(msgs)-1].Values; last["end"] != "ok" {
		t.Errorf("live stream's last entry = %v; want its clean end", last)
	}
}
