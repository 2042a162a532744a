// Package logsink is an asynchronous, bounded io.Writer for log lines: a
// request that logs copies its line into memory and goes on, and one
// background goroutine writes what has gathered to the real writer (a pipe
// or a file) in as few writes as it can.
//
// Why: at the default level every request writes an access line, and a
// write(2) to stderr per line costs a hit a large share of its own CPU and
// stalls it whenever the reader of the pipe (a container runtime, a log
// shipper) is slow. Batching turns thousands of writes into a few, and the
// bound means a stalled reader costs log lines, never requests: when the
// pending bytes reach the limit a line is dropped and counted (Dropped,
// exported as corral_log_lines_dropped_total), the way a UDP syslog or a
// full journald rate limit drops instead of blocking.
//
// The writer does not chase every line: after the first line of a batch
// it waits Delay (10 ms) for more, so at thousands of requests a second a
// write(2) carries dozens of lines and the writer wakes a hundred times a
// second, not once per request. A line reaches the writer at most Delay
// late; Flush and Close write at once.
//
// Each Write must be one whole line (slog's handlers write one record per
// call), so a drop never cuts a line in two. Close writes what is pending
// and stops the goroutine; the gateway calls it last on shutdown.
//
// Rejected alternatives: a channel of lines costs an allocation, a
// channel operation and a goroutine wake-up per line; a bufio.Writer behind a mutex does the write(2) on the
// request that fills the buffer, which is the stall this package exists
// to avoid.
package logsink

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultDelay is how long the writer gathers lines before a write.
const DefaultDelay = 10 * time.Millisecond

// DefaultLimit is the default bound on pending bytes: about 4,000 access
// lines, a few hundred milliseconds of the busiest gateway's log.
const DefaultLimit = 1 << 20

// ErrClosed is returned by Write after Close.
var ErrClosed = errors.New("logsink: closed")

// Options configure a Sink.
type Options struct {
	// Limit is the most bytes held for the writer; a line that does not
	// fit is dropped and counted. Default DefaultLimit.
	Limit int
	// Delay is how long the writer gathers lines after the first of a
	// batch before it writes them; half the limit pending writes at once.
	// Default DefaultDelay.
	Delay time.Duration
}

// Sink is an asynchronous, bounded writer in front of another writer.
// Its methods are safe for concurrent use.
type Sink struct {
	w      io.Writer
	limit  int
	delay  time.Duration
	wake   chan struct{} // capacity 1: "a batch has started"
	urgent chan struct{} // capacity 1: "write now" (Flush, Close, half full)
	done   chan struct{} // closed when the writing goroutine has exited

	dropped atomic.Uint64

	mu      sync.Mutex // protects pending, spare, closed, flushes
	pending []byte     // lines not yet taken by the writer
	spare   []byte     // the buffer the writer last emptied, reused
	closed  bool
	// abandoned: CloseContext gave up on a blocked writer; what is
	// pending is not written after the blocked write returns.
	abandoned bool
	flushes   []chan struct{} // Flush calls waiting for what was pending when they came
}

// New starts a Sink writing to w. Close stops it.
func New(w io.Writer, o Options) *Sink {
	s := &Sink{
		w:      w,
		limit:  cmp.Or(o.Limit, DefaultLimit),
		delay:  cmp.Or(o.Delay, DefaultDelay),
		wake:   make(chan struct{}, 1),
		urgent: make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	s.pending = make([]byte, 0, min(s.limit, 64<<10))
	go s.run()
	return s
}

// Write queues p, one whole line, and returns at once: it never waits for
// the underlying writer. When the pending bytes would pass the limit the
// line is dropped and counted; Write still reports success, because a log
// line is not worth failing (or retrying) the caller's work for.
func (s *Sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return 0, ErrClosed
	}
	if len(s.pending)+len(p) > s.limit {
		s.mu.Unlock()
		s.dropped.Add(1)
		return len(p), nil
	}
	first := len(s.pending) == 0
	half := len(s.pending) < s.limit/2 && len(s.pending)+len(p) >= s.limit/2
	s.pending = append(s.pending, p...)
	s.mu.Unlock()
	if first {
		signal(s.wake)
	}
	if half {
		signal(s.urgent)
	}
	return len(p), nil
}

// Dropped is how many lines were dropped because the writer fell behind.
func (s *Sink) Dropped() uint64 { return s.dropped.Load() }

// Flush waits until every line queued before it was handed to the
// underlying writer (or the sink closed).
func (s *Sink) Flush() {
	ch := make(chan struct{})
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		<-s.done
		return
	}
	// The writer takes flushes and pending lines in one swap, so ch is
	// closed after every line queued before this point was written.
	s.flushes = append(s.flushes, ch)
	s.mu.Unlock()
	signal(s.urgent)
	select {
	case <-ch:
	case <-s.done:
	}
}

// Close writes everything pending, stops the writing goroutine and waits
// for it. Writes after Close fail with ErrClosed. It does not close the
// underlying writer. A writer that never returns (a stderr nobody reads)
// holds Close forever; CloseContext bounds the wait.
func (s *Sink) Close() error { return s.CloseContext(context.Background()) }

// CloseContext is Close that gives up waiting when ctx ends, so a process
// whose log reader has stopped still exits within its shutdown deadline.
// Giving up loses the lines still pending; the writing goroutine exits
// as soon as the stuck write returns (it writes nothing after that).
func (s *Sink) CloseContext(ctx context.Context) error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		signal(s.urgent)
	}
	s.mu.Unlock()
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		s.abandoned = true
		s.mu.Unlock()
		return fmt.Errorf("logsink: close: writer still blocked: %w", context.Cause(ctx))
	}
}

// signal sends on a channel of capacity 1 unless a signal is pending.
func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// run is the one goroutine that writes: when a batch starts it waits for
// the delay (or an urgent signal), then writes what gathered.
func (s *Sink) run() {
	defer close(s.done)
	t := time.NewTimer(s.delay)
	t.Stop()
	for {
		select {
		case <-s.wake:
			t.Reset(s.delay)
			select {
			case <-t.C:
			case <-s.urgent:
				t.Stop()
			}
		case <-s.urgent:
		}
		if s.drain() {
			return
		}
	}
}

// drain writes everything pending, in batches taken under the lock and
// written outside it, and reports whether the sink is closed.
func (s *Sink) drain() (closed bool) {
	for {
		s.mu.Lock()
		batch, flushes, closed := s.pending, s.flushes, s.closed
		s.pending, s.spare, s.flushes = s.spare[:0], nil, nil
		abandoned := s.abandoned
		s.mu.Unlock()
		if len(batch) > 0 && !abandoned {
			// A failed write loses this batch; there is nowhere to
			// report it but the log itself.
			_, _ = s.w.Write(batch)
		}
		for _, ch := range flushes {
			close(ch)
		}
		s.mu.Lock()
		if cap(batch) <= max(s.limit, 64<<10) {
			s.spare = batch[:0]
		}
		more := len(s.pending) > 0 || len(s.flushes) > 0
		s.mu.Unlock()
		if !more {
			return closed
		}
	}
}
