package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

func TestMemoryExpiryBoundary(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := NewMemory(MemoryOptions{Now: clock.Now})
	t.Cleanup(func() { _ = m.Close() })

	key := testKey("acme", "r")
	mustSet(t, m, key, fullEntry(clock), time.Minute)
	clock.Advance(time.Minute - time.Nanosecond)
	if _, err := m.Get(ctx, key); err != nil {
		t.Fatalf("Get 1ns before expiry: %v", err)
	}
	clock.Advance(time.Nanosecond)
	if _, err := m.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get at expiry = %v, want ErrNotFound", err)
	}
}

func TestMemoryReplaceResetsTTL(t *testing.T) {
	ctx := context.Background()
	clock := newFakeClock()
	m := NewMemory(MemoryOptions{Now: clock.Now})
	t.Cleanup(func() { _ = m.Close() })

	key := testKey("acme", "r")
	mustSet(t, m, key, fullEntry(clock), time.Hour)
	mustSet(t, m, key, fullEntry(clock), time.Second)
	clock.Advance(time.Second)
	if _, err := m.Get(ctx, key); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get after the new, shorter ttl = %v, want ErrNotFound", err)
	}
}

func TestMemoryStaysWithinMaxBytes(t *testing.T) {
	const maxBytes = 64 << 10
	m := NewMemory(MemoryOptions{MaxBytes: maxBytes})
	t.Cleanup(func() { _ = m.Close() })

	body := bytes.Repeat([]byte("x"), 2<<10)
	const n = 200 // about 460 KiB of estimated weight, 7x the bound
	for i := range n {
		mustSet(t, m, fmt.Sprintf("corral:v1:{acme:%064x}:r", i), &Entry{Status: 200, Body: body}, time.Hour)
	}
	m.c.CleanUp() // run the eviction otter schedules after writes

	if got := m.Bytes(); got > maxBytes || got == 0 {
		t.Errorf("Bytes() = %d, want within (0, %d]", got, maxBytes)
	}
	if got := m.Len(); got >= n || got == 0 {
		t.Errorf("Len() = %d, want some but not all of %d entries", got, n)
	}
}

func TestMemoryRefusesEntryLargerThanMaxBytes(t *testing.T) {
	m := NewMemory(MemoryOptions{MaxBytes: 4 << 10})
	t.Cleanup(func() { _ = m.Close() })

	err := m.Set(context.Background(), testKey("acme", "r"), &Entry{Status: 200, Body: make([]byte, 4<<10)}, time.Hour)
	if !errors.Is(err, ErrNotCacheable) {
		t.Fatalf("Set = %v, want ErrNotCacheable", err)
	}
}

func TestMemoryDefaults(t *testing.T) {
	m := NewMemory(MemoryOptions{})
	t.Cleanup(func() { _ = m.Close() })
	if got := m.c.GetMaximum(); got != DefaultMaxBytes {
		t.Errorf("maximum = %d, want %d", got, DefaultMaxBytes)
	}
}

func TestWeigh(t *testing.T) {
	e := &Entry{Body: make([]byte, 1000), Header: map[string][]string{"Content-Type": {"application/json"}}}
	key := testKey("acme", "r")
	want := int64(entryOverhead + len(key) + 1000 + len("Content-Type") + 24 + len("application/json") + 16)
	if got := weigh(key, e); got != want {
		t.Errorf("weigh = %d, want %d", got, want)
	}
}

func BenchmarkMemoryGetHit(b *testing.B) {
	m := NewMemory(MemoryOptions{})
	b.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	key := testKey("acme", "r")
	if err := m.Set(ctx, key, benchEntry(), time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Get(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMemoryGetHitParallel(b *testing.B) {
	m := NewMemory(MemoryOptions{})
	b.Cleanup(func() { _ = m.Close() })
	ctx := context.Background()
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprintf("corral:v1:{acme:%064x}:r", i)
		if err := m.Set(ctx, keys[i], benchEntry(), time.Hour); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if _, err := m.Get(ctx, keys[i&1023]); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}
