package ratelimit

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestMemoryConcurrent(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	var allowedN atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 90 {
		wg.Go(func() {
			<-start
			r, err := m.AllowN(context.Background(), "k", PerMinute(30), 1)
			if err != nil {
				t.Error(err)
			}
			if r.Allowed {
				allowedN.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	if got := allowedN.Load(); got != 30 {
		t.Fatalf("allowed %d of 90, want exactly 30", got)
	}
}

// TestMemorySweepDropsFullBuckets: a bucket that refilled is the same as no
// entry, so sweeps drop it and idle tenants cost no memory.
func TestMemorySweepDropsFullBuckets(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(MemoryOptions{Now: clock.Now, SweepEvery: 10})
	ctx := context.Background()
	for i := range 5 {
		if _, err := m.AllowN(ctx, "k"+strconv.Itoa(i), PerMinute(30), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := m.Len(); got != 5 {
		t.Fatalf("Len = %d, want 5", got)
	}
	clock.Advance(2 * time.Second) // every bucket is full again
	for range 10 {
		if _, err := m.AllowN(ctx, "peek", PerMinute(30), 0); err != nil { // peeks store nothing
			t.Fatal(err)
		}
	}
	if got := m.Len(); got != 0 {
		t.Fatalf("Len after sweep = %d, want 0", got)
	}
}

// TestMemoryBounded: past MaxKeys the bucket closest to full is forgotten,
// so memory stays bounded whatever the key count.
func TestMemoryBounded(t *testing.T) {
	clock := newFakeClock()
	m := NewMemory(MemoryOptions{Now: clock.Now, MaxKeys: 4, SweepEvery: 1 << 20})
	ctx := context.Background()
	for i := range 100 {
		clock.Advance(time.Millisecond)
		if _, err := m.AllowN(ctx, "k"+strconv.Itoa(i), PerMinute(30), 1); err != nil {
			t.Fatal(err)
		}
		if got := m.Len(); got > 4 {
			t.Fatalf("after %d keys Len = %d, want ≤ 4", i+1, got)
		}
	}
	// The sample covers the whole map here, so the newest key survived.
	r, err := m.AllowN(ctx, "k99", PerMinute(30), 0)
	if err != nil {
		t.Fatal(err)
	}
	if r.Remaining != 29 {
		t.Fatalf("newest key lost: %+v", r)
	}
}
