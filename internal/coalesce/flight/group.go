// Package flight makes concurrent identical requests share one piece of
// work: the first caller for a key starts it, later callers join it, and
// everyone gets the same result.
//
// The shape follows x/sync/singleflight (a usable zero value, Forget,
// load and dedup counts as groupcache's Stats) with the context semantics
// of tailscale's DoChanContext: the work runs on a context detached from
// every caller, so the caller that happened to start it can hang up
// without failing the others, and it is cancelled only when the last
// waiter has left, because then nobody wants the answer.
//
// Record is the companion for streamed answers: an append-only log of
// events that each waiter reads with its own cursor, so followers see a
// stream live and a slow reader slows nobody else.
//
// It is the stdlib-only leaf beneath internal/coalesce, as singleflight is
// beneath groupcache: the cross-instance protocol built on it (lock, done
// bus, live streams, takeover) is coalesce's.
package flight

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"
)

// Work is a flight's job. Its ctx is detached from every caller's and is
// cancelled when the last waiter leaves; the job bounds its own duration.
type Work func(ctx context.Context) error

// Group coalesces work by key. The zero value is ready to use.
type Group[T any] struct {
	mu sync.Mutex            // protects m
	m  map[string]*Flight[T] // in-flight work; an entry is removed when its work ends or its last waiter leaves

	loads  atomic.Int64
	joined atomic.Int64
}

// Flight is one in-progress piece of work and its waiters.
type Flight[T any] struct {
	g      *Group[T]
	key    string
	val    T
	done   chan struct{}
	err    error // set before done is closed
	cancel context.CancelFunc
	refs   int // waiters that have not left; guarded by g.mu
}

// Stats counts work started and callers that joined work already running.
type Stats struct {
	Loads  int64 // flights started (each is one piece of work)
	Joined int64 // callers that shared a flight instead of starting one
}

// Join returns the flight for key. When none is running, Join calls start
// to make the flight's shared value and its work, and runs the work in a
// new goroutine; leader is true for that caller. Every caller, leader or
// not, must call Leave exactly once when it stops waiting.
func (g *Group[T]) Join(key string, start func() (T, Work)) (f *Flight[T], leader bool) {
	g.mu.Lock()
	if g.m == nil {
		g.m = make(map[string]*Flight[T])
	}
	if f, ok := g.m[key]; ok {
		f.refs++
		g.mu.Unlock()
		g.joined.Add(1)
		return f, false
	}
	val, work := start()
	ctx, cancel := context.WithCancel(context.Background())
	f = &Flight[T]{g: g, key: key, val: val, done: make(chan struct{}), cancel: cancel, refs: 1}
	g.m[key] = f
	g.mu.Unlock()
	g.loads.Add(1)
	go f.run(ctx, work)
	return f, true
}

func (f *Flight[T]) run(ctx context.Context, work Work) {
	defer func() {
		if v := recover(); v != nil {
			f.err = &PanicError{Value: v, Stack: debug.Stack()}
		}
		f.g.forgetFlight(f)
		f.cancel()
		close(f.done)
	}()
	f.err = work(ctx)
}

// Value is the flight's shared value, available at once, before the work
// ends (for example a Record that followers read while it fills).
func (f *Flight[T]) Value() T { return f.val }

// Done is closed when the work has ended.
func (f *Flight[T]) Done() <-chan struct{} { return f.done }

// Err is the work's error; valid once Done is closed.
func (f *Flight[T]) Err() error { return f.err }

// Wait blocks until the work ends or ctx does.
func (f *Flight[T]) Wait(ctx context.Context) error {
	select {
	case <-f.done:
		return f.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Leave records that a waiter stopped waiting. When the last waiter leaves
// before the work has ended, the work's context is cancelled and the key
// is freed so a newcomer starts fresh work rather than joining a dying one.
func (f *Flight[T]) Leave() {
	g := f.g
	g.mu.Lock()
	f.refs--
	last := f.refs == 0
	if last && g.m[f.key] == f {
		select {
		case <-f.done:
		default:
			delete(g.m, f.key)
		}
	}
	g.mu.Unlock()
	if last {
		f.cancel()
	}
}

// Forget makes the next Join for key start new work even if a flight is
// still running; current waiters keep theirs.
func (g *Group[T]) Forget(key string) {
	g.mu.Lock()
	delete(g.m, key)
	g.mu.Unlock()
}

func (g *Group[T]) forgetFlight(f *Flight[T]) {
	g.mu.Lock()
	if g.m[f.key] == f {
		delete(g.m, f.key)
	}
	g.mu.Unlock()
}

// Len is the number of flights in progress.
func (g *Group[T]) Len() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.m)
}

// Stats returns the group's counters.
func (g *Group[T]) Stats() Stats {
	return Stats{Loads: g.loads.Load(), Joined: g.joined.Load()}
}

// PanicError is a flight's work that panicked. Waiters get it as the
// flight's error; the process keeps running.
type PanicError struct {
	Value any
	Stack []byte
}

func (e *PanicError) Error() string { return fmt.Sprintf("coalesce: work panicked: %v", e.Value) }
