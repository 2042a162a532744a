package flight

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestJoinSharesOneLoad(t *testing.T) {
	var g Group[*int]
	release := make(chan struct{})
	var calls atomic.Int32
	start := func() (*int, Work) {
		v := new(int)
		return v, func(ctx context.Context) error {
			calls.Add(1)
			<-release
			*v = 42
			return nil
		}
	}
	const n = 50
	var wg sync.WaitGroup
	var leaders atomic.Int32
	joined := make(chan struct{}, n)
	results := make(chan int, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, leader := g.Join("k", start)
			defer f.Leave()
			if leader {
				leaders.Add(1)
			}
			joined <- struct{}{}
			if err := f.Wait(context.Background()); err != nil {
				t.Error(err)
			}
			results <- *f.Value()
		}()
	}
	for range n {
		<-joined
	}
	close(release)
	wg.Wait()
	close(results)
	for v := range results {
		if v != 42 {
			t.Errorf("result = %d; want 42", v)
		}
	}
	if calls.Load() != 1 || leaders.Load() != 1 {
		t.Errorf("work ran %d times with %d leaders; want 1 and 1", calls.Load(), leaders.Load())
	}
	if st := g.Stats(); st.Loads != 1 || st.Joined != n-1 {
		t.Errorf("Stats = %+v; want 1 load, %d joined", st, n-1)
	}
	if g.Len() != 0 {
		t.Errorf("Len = %d after the flight; want 0", g.Len())
	}
}

func TestLeaderLeavingDoesNotCancel(t *testing.T) {
	var g Group[struct{}]
	release := make(chan struct{})
	var workErr error
	start := func() (struct{}, Work) {
		return struct{}{}, func(ctx context.Context) error {
			<-release
			workErr = ctx.Err()
			return nil
		}
	}
	leader, _ := g.Join("k", start)
	follower, isLeader := g.Join("k", start)
	if isLeader {
		t.Fatal("second Join became leader")
	}
	leader.Leave() // the first client hangs up
	close(release)
	if err := follower.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	follower.Leave()
	if workErr != nil {
		t.Errorf("work context ended (%v) while a follower still waited", workErr)
	}
}

func TestLastLeaveCancels(t *testing.T) {
	var g Group[struct{}]
	started := make(chan struct{})
	cancelled := make(chan error, 1)
	f, _ := g.Join("k", func() (struct{}, Work) {
		return struct{}{}, func(ctx context.Context) error {
			close(started)
			<-ctx.Done()
			cancelled <- ctx.Err()
			return ctx.Err()
		}
	})
	<-started
	f.Leave()
	if err := <-cancelled; !errors.Is(err, context.Canceled) {
		t.Errorf("work ctx err = %v; want Canceled", err)
	}
	<-f.Done()
	// A newcomer starts fresh work instead of joining the cancelled one.
	f2, leader := g.Join("k", func() (struct{}, Work) { return struct{}{}, func(context.Context) error { return nil } })
	defer f2.Leave()
	if !leader || f2 == f {
		t.Error("Join after the last waiter left joined the cancelled flight")
	}
	<-f2.Done()
}

func TestWaitHonoursCallerContext(t *testing.T) {
	var g Group[struct{}]
	release := make(chan struct{})
	f, _ := g.Join("k", func() (struct{}, Work) {
		return struct{}{}, func(ctx context.Context) error {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return nil
		}
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v; want the caller's Canceled", err)
	}
	f.Leave()
	close(release)
	<-f.Done()
}

func TestPanicBecomesError(t *testing.T) {
	var g Group[struct{}]
	f, _ := g.Join("k", func() (struct{}, Work) {
		return struct{}{}, func(context.Context) error { panic("boom") }
	})
	defer f.Leave()
	var pe *PanicError
	if err := f.Wait(context.Background()); !errors.As(err, &pe) || pe.Value != "boom" {
		t.Errorf("Wait = %v; want a PanicError", err)
	}
}

func TestForget(t *testing.T) {
	var g Group[int]
	release := make(chan struct{})
	mk := func(v int) func() (int, Work) {
		return func() (int, Work) {
			return v, func(context.Context) error { <-release; return nil }
		}
	}
	f1, _ := g.Join("k", mk(1))
	g.Forget("k")
	f2, leader := g.Join("k", mk(2))
	if !leader || f2.Value() != 2 {
		t.Error("Join after Forget did not start new work")
	}
	close(release)
	for _, f := range []*Flight[int]{f1, f2} {
		<-f.Done()
		f.Leave()
	}
	if g.Len() != 0 {
		t.Errorf("Len = %d; want 0", g.Len())
	}
}

func TestRecordCursors(t *testing.T) {
	r := NewRecord()
	ctx := context.Background()
	for i := range 14 {
		r.Append(fmt.Appendf(nil, "e%d", i))
	}
	late := r.Cursor()
	batch, err := late.Next(ctx)
	if err != nil || len(batch) != 14 || string(batch[13]) != "e13" {
		t.Fatalf("late joiner got %d events, %v; want the 14 already there at once", len(batch), err)
	}
	got := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		for {
			b, err := late.Next(ctx)
			if err != nil {
				done <- err
				return
			}
			for _, ev := range b {
				got <- string(ev)
			}
		}
	}()
	r.Append([]byte("e14"))
	if ev := <-got; ev != "e14" {
		t.Errorf("live event = %q; want e14", ev)
	}
	r.Close(nil)
	if err := <-done; !errors.Is(err, io.EOF) {
		t.Errorf("end = %v; want io.EOF", err)
	}
	// An independent cursor still reads everything from the start.
	all, _ := r.Cursor().Next(ctx)
	if len(all) != 15 {
		t.Errorf("fresh cursor read %d events; want 15", len(all))
	}
}

func TestRecordError(t *testing.T) {
	r := NewRecord()
	r.Append([]byte("a"))
	boom := errors.New("cut")
	r.Close(boom)
	r.Append([]byte("ignored"))
	c := r.Cursor()
	if b, err := c.Next(context.Background()); err != nil || len(b) != 1 {
		t.Fatalf("Next = %d, %v; want the one event first", len(b), err)
	}
	if _, err := c.Next(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Next after the events = %v; want the record's error", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := NewRecord().Cursor().Next(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Next on a cancelled ctx = %v; want Canceled", err)
	}
}

func ExampleGroup() {
	var g Group[*string]
	f, leader := g.Join("prompt-key", func() (*string, Work) {
		answer := new(string)
		return answer, func(context.Context) error {
			*answer = "one upstream call"
			return nil
		}
	})
	defer f.Leave()
	_ = f.Wait(context.Background())
	fmt.Println(leader, *f.Value())
	// Output: true one upstream call
}

func BenchmarkJoinLeave(b *testing.B) {
	var g Group[struct{}]
	release := make(chan struct{})
	keep, _ := g.Join("k", func() (struct{}, Work) {
		return struct{}{}, func(context.Context) error { <-release; return nil }
	})
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f, _ := g.Join("k", nil)
			f.Leave()
		}
	})
	close(release)
	<-keep.Done()
	keep.Leave()
}

func BenchmarkRecordFanOut(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		r := NewRecord()
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			c := r.Cursor()
			go func() {
				defer wg.Done()
				for {
					if _, err := c.Next(context.Background()); err != nil {
						return
					}
				}
			}()
		}
		for range 20 {
			r.Append([]byte("data: x\n\n"))
		}
		r.Close(nil)
		wg.Wait()
	}
}

func TestCursorReady(t *testing.T) {
	isClosed := func(ch <-chan struct{}) bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	r := NewRecord()
	c := r.Cursor()
	ready := c.Ready()
	if isClosed(ready) {
		t.Fatal("Ready of an empty open record is closed; want open")
	}
	r.Append([]byte("a"))
	if !isClosed(ready) {
		t.Error("Ready taken before an Append is still open after it")
	}
	if !isClosed(c.Ready()) {
		t.Error("Ready with an unread event is open; want closed")
	}
	if _, err := c.Next(context.Background()); err != nil {
		t.Fatal(err)
	}
	ready = c.Ready()
	if isClosed(ready) {
		t.Fatal("Ready with every event read is closed; want open")
	}
	r.Close(nil)
	if !isClosed(ready) || !isClosed(c.Ready()) {
		t.Error("Ready stays open after the record's end; want closed")
	}
}
