package logsink

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/logtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// gate is a writer whose writes wait until release is closed; entered
// receives once per write, when it starts.
type gate struct {
	logtest.Buffer
	entered chan struct{}
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}, 100), release: make(chan struct{})}
}

func (g *gate) Write(p []byte) (int, error) {
	g.entered <- struct{}{}
	<-g.release
	return g.Buffer.Write(p)
}

func TestCloseWritesEveryLineInOrder(t *testing.T) {
	var out logtest.Buffer
	s := New(&out, Options{})
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("{\"n\":%d}\n", i)
		want.WriteString(line)
		if n, err := s.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if out.String() != want.String() {
		t.Fatalf("wrote %d bytes, want the %d bytes of the 1000 lines in order", len(out.String()), want.Len())
	}
	if s.Dropped() != 0 {
		t.Fatalf("Dropped = %d, want 0", s.Dropped())
	}
	if _, err := s.Write([]byte("late\n")); err != ErrClosed {
		t.Fatalf("Write after Close = %v, want ErrClosed", err)
	}
}

// A writer that stops taking lines makes the sink drop and count the
// lines beyond its limit; Write never waits for it.
func TestStalledWriterDropsAndCounts(t *testing.T) {
	g := newGate()
	const line = "0123456789abcde\n" // 16 bytes
	s := New(g, Options{Limit: 4 * len(line)})
	if _, err := s.Write([]byte("first line held\n")); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the writer holds the first line and is stuck
	for range 4 + 3 {
		if n, err := s.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v; want %d, nil even when dropped", n, err, len(line))
		}
	}
	if s.Dropped() != 3 {
		t.Fatalf("Dropped = %d, want 3 (4 lines fit the limit)", s.Dropped())
	}
	close(g.release)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	want := "first line held\n" + strings.Repeat(line, 4)
	if g.String() != want {
		t.Fatalf("wrote %q, want %q", g.String(), want)
	}
}

func TestFlushWaitsForQueuedLines(t *testing.T) {
	var out logtest.Buffer
	s := New(&out, Options{})
	defer s.Close()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 250 {
				_, _ = fmt.Fprintf(s, "w%d-%d\n", w, i)
			}
		}()
	}
	wg.Wait()
	s.Flush()
	got := strings.Count(out.String(), "\n")
	if got != 1000 {
		t.Fatalf("after Flush the writer has %d lines, want 1000", got)
	}
	for w := range 4 {
		if !strings.Contains(out.String(), fmt.Sprintf("w%d-249\n", w)) {
			t.Fatalf("writer %d's last line missing after Flush", w)
		}
	}
}

func TestFlushAfterCloseReturns(t *testing.T) {
	var out logtest.Buffer
	s := New(&out, Options{})
	_, _ = s.Write([]byte("x\n"))
	_ = s.Close()
	s.Flush()
	if out.String() != "x\n" {
		t.Fatalf("wrote %q, want %q", out.String(), "x\n")
	}
}

func BenchmarkWrite(b *testing.B) {
	s := New(discard{}, Options{})
	defer s.Close()
	line := []byte(`{"time":"2026-12-01T13:00:00.000000000Z","level":"INFO","msg":"request","request_id":"corral-0123456789ab-1","method":"POST","path":"/v1/chat/completions","status":200}` + "\n")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			_, _ = s.Write(line)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// countingWriter counts the writes it gets.
type countingWriter struct {
	logtest.Buffer
	mu     sync.Mutex // protects writes
	writes int
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.mu.Lock()
	c.writes++
	c.mu.Unlock()
	return c.Buffer.Write(p)
}

// Lines gathered within the delay go out in one write: the point of the
// sink is one write(2) for many requests, not one each.
func TestLinesWithinTheDelayShareOneWrite(t *testing.T) {
	var out countingWriter
	s := New(&out, Options{Delay: time.Hour})
	defer s.Close()
	for i := range 100 {
		_, _ = fmt.Fprintf(s, "line %d\n", i)
	}
	s.Flush()
	out.mu.Lock()
	writes := out.writes
	out.mu.Unlock()
	if writes != 1 {
		t.Fatalf("100 lines went out in %d writes, want 1", writes)
	}
	if n := strings.Count(out.String(), "\n"); n != 100 {
		t.Fatalf("wrote %d lines, want 100", n)
	}
}

// A writer that never returns (a stderr nobody reads) must not hold the
// process past its shutdown deadline: CloseContext gives up when its
// context ends, and the writing goroutine exits once the stuck write
// returns, writing nothing more.
func TestCloseContextGivesUpOnAStuckWriter(t *testing.T) {
	g := newGate()
	s := New(g, Options{})
	if _, err := s.Write([]byte("held\n")); err != nil {
		t.Fatal(err)
	}
	<-g.entered // the writer is stuck in its first write
	if _, err := s.Write([]byte("pending\n")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.CloseContext(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("CloseContext = %v, want context.Canceled", err)
	}
	close(g.release)
	if err := s.Close(); err != nil { // waits for the goroutine to exit
		t.Fatal(err)
	}
	if g.String() != "held\n" {
		t.Fatalf("wrote %q, want only the line that was already being written", g.String())
	}
}
