package breaker

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

func TestBreaker(t *testing.T) {
	now := time.Unix(0, 0)
	var mu sync.Mutex
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	var changes []bool
	b := New(Options{Backoff: time.Second, Now: clock, OnChange: func(up bool) { changes = append(changes, up) }})
	boom := errors.New("dial tcp: connection refused")

	b.Record(boom)
	b.Record(boom)
	if !b.Healthy() || !b.Allow() {
		t.Fatal("tripped before b.o.TripAfter consecutive failures")
	}
	b.Record(nil) // a success resets the count
	for range b.o.TripAfter - 1 {
		b.Record(boom)
	}
	if !b.Healthy() {
		t.Fatal("tripped although a success came in between")
	}
	b.Record(boom)
	if b.Healthy() || b.Allow() {
		t.Fatal("not down after b.o.TripAfter consecutive failures")
	}
	if len(changes) != 1 || changes[0] {
		t.Fatalf("changes = %v; want the down transition reported by the call that made it", changes)
	}
	b.Record(context.Canceled) // a caller hanging up says nothing about Redis
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if !b.Allow() {
		t.Fatal("no probe after the backoff")
	}
	if b.Allow() {
		t.Fatal("two probes in one backoff")
	}
	b.Record(nil)
	if !b.Healthy() || !b.Allow() {
		t.Fatal("not back up after a successful probe")
	}
	if len(changes) != 2 || !changes[1] {
		t.Errorf("changes = %v; want down then up", changes)
	}
}

// TestRunProbesBack: an idle instance (no calls at all) notices Redis is
// back through the background probe, and reports it through OnChange.
func TestRunProbesBack(t *testing.T) {
	probes := make(chan chan error) // each probe asks the test for its answer
	changes := make(chan bool, 4)
	b := New(Options{
		TripAfter:     1,
		Backoff:       time.Hour, // no request-driven probe could fire in this test
		ProbeInterval: time.Millisecond,
		OnChange:      func(up bool) { changes <- up },
		Probe: func(ctx context.Context) error {
			answer := make(chan error)
			select {
			case probes <- answer:
			case <-ctx.Done():
				return ctx.Err()
			}
			return <-answer
		},
	})
	b.Record(errors.New("connection refused"))
	if up := <-changes; up || b.Healthy() {
		t.Fatal("not down after a failure")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	(<-probes) <- errors.New("still refused")
	if b.Healthy() {
		t.Fatal("healthy after a failed probe")
	}
	(<-probes) <- nil
	if up := <-changes; !up || !b.Healthy() {
		t.Fatal("a successful background probe did not bring Redis back")
	}
}

// TestRunWithoutProbe returns at once: nothing to probe with.
func TestRunWithoutProbe(t *testing.T) {
	New(Options{}).Run(context.Background())
	var nilBreaker *Breaker
	nilBreaker.Run(context.Background())
	if !nilBreaker.Allow() || !nilBreaker.Healthy() {
		t.Error("a nil breaker is not healthy")
	}
}

// TestRunProbesWhileUp: an idle instance notices Redis has gone through
// the background probe too, confirming a failed probe at once (TripAfter
// probes in a row) rather than one probe per interval; a lone failure
// followed by an answer does not trip it.
func TestRunProbesWhileUp(t *testing.T) {
	probes := make(chan chan error)
	changes := make(chan bool, 4)
	b := New(Options{
		TripAfter:     3,
		ProbeInterval: time.Millisecond,
		OnChange:      func(up bool) { changes <- up },
		Probe: func(ctx context.Context) error {
			answer := make(chan error)
			select {
			case probes <- answer:
			case <-ctx.Done():
				return ctx.Err()
			}
			return <-answer
		},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	(<-probes) <- errors.New("one slow reply")
	(<-probes) <- nil
	if !b.Healthy() {
		t.Fatal("one failed probe tripped the breaker")
	}
	for range 3 {
		(<-probes) <- errors.New("connection refused")
	}
	if up := <-changes; up || b.Healthy() {
		t.Fatal("three failed probes in a row did not mark Redis down")
	}
	(<-probes) <- nil
	if up := <-changes; !up || !b.Healthy() {
		t.Fatal("a successful probe did not bring Redis back")
	}
}
