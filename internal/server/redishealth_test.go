package server

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
	b := newBreaker(time.Second, clock, nopLogger())
	var changes []bool
	b.onChange = func(up bool) { changes = append(changes, up) }
	boom := errors.New("dial tcp: connection refused")

	b.record(boom)
	b.record(boom)
	if !b.healthy() || !b.allow() {
		t.Fatal("tripped before tripAfter consecutive failures")
	}
	b.record(nil) // a success resets the count
	for range tripAfter - 1 {
		b.record(boom)
	}
	if !b.healthy() {
		t.Fatal("tripped although a success came in between")
	}
	b.record(boom)
	if b.healthy() || b.allow() {
		t.Fatal("not down after tripAfter consecutive failures")
	}
	if len(changes) != 1 || changes[0] {
		t.Fatalf("changes = %v; want the down transition reported by the call that made it", changes)
	}
	b.record(context.Canceled) // a caller hanging up says nothing about Redis
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	if !b.allow() {
		t.Fatal("no probe after the backoff")
	}
	if b.allow() {
		t.Fatal("two probes in one backoff")
	}
	b.record(nil)
	if !b.healthy() || !b.allow() {
		t.Fatal("not back up after a successful probe")
	}
	if len(changes) != 2 || !changes[1] {
		t.Errorf("changes = %v; want down then up", changes)
	}
}
