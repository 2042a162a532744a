package server

import (
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
)

// What a Redis-mode leader waits for before its upstream call is what its
// client's first byte waits for: these tests pin it.

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
