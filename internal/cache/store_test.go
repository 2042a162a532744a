package cache

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

// testStore is what the behaviour table needs from a store.
type testStore interface {
	Store
	PatternDeleter
}

// backend is one store under test plus the hooks that differ per store.
type backend struct {
	store testStore
	clock *fakeClock
	// expire returns once key, stored with ttl, has expired: the memory
	// store's clock is advanced, Redis's own expiry is polled for.
	expire func(t *testing.T, key string, ttl time.Duration)
}

// backends opens each store, fresh, for one test.
var backends = []struct {
	name string
	open func(t *testing.T) backend
}{
	{name: "memory", open: openMemoryBackend},
	{name: "redis", open: openRedisBackend},
}

func openMemoryBackend(t *testing.T) backend {
	clock := newFakeClock()
	m := NewMemory(MemoryOptions{Now: clock.Now})
	t.Cleanup(func() { _ = m.Close() })
	return backend{
		store: m,
		clock: clock,
		expire: func(_ *testing.T, _ string, ttl time.Duration) {
			clock.Advance(ttl)
		},
	}
}

func openRedisBackend(t *testing.T) backend {
	rdb := redistest.Client(t)
	clock := newFakeClock()
	return backend{
		store: NewRedis(rdb, RedisOptions{Now: clock.Now}),
		clock: clock,
		expire: func(t *testing.T, key string, ttl time.Duration) {
			t.Helper()
			waitGone(t, rdb, key, ttl)
		},
	}
}

// waitGone polls until Redis has expired key, for at most 40 TTLs. Redis
// expires on access, so EXISTS itself removes a key whose time is up.
func waitGone(t *testing.T, rdb *redis.Client, key string, ttl time.Duration) {
	t.Helper()
	ctx := context.Background()
	deadline := time.Now().Add(40 * ttl)
	tick := time.NewTicker(ttl / 10)
	defer tick.Stop()
	for {
		n, err := rdb.Exists(ctx, key).Result()
		if err != nil {
			t.Fatalf("exists %s: %v", key, err)
		}
		if n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists %v after a TTL of %v", key, 40*ttl, ttl)
		}
		<-tick.C
	}
}

func testKey(tenant, kind string) string {
	return fmt.Sprintf("corral:v1:{%s:%064x}:%s", tenant, len(tenant)*7919, kind)
}

func fullEntry(clock *fakeClock) *Entry {
	return &Entry{
		Status:           200,
		Header:           http.Header{"Content-Type": {"application/json"}, "Openai-Version": {"2020-10-01"}},
		Body:             []byte(`{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`),
		StoredAt:         clock.Now().Add(-time.Minute),
		TTL:              time.Hour,
		PromptTokens:     12,
		CompletionTokens: 34,
	}
}

func TestStoreBehaviour(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		run  func(t *testing.T, b backend)
	}{
		{"roundtrip preserves every field", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			want := fullEntry(b.clock)
			mustSet(t, b.store, key, want, 10*time.Minute)
			got, err := b.store.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		}},
		{"zero StoredAt and TTL are filled in", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			give := &Entry{Status: 200, Body: []byte(`{}`)}
			mustSet(t, b.store, key, give, 90*time.Second)
			got, err := b.store.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			want := &Entry{Status: 200, Body: []byte(`{}`), StoredAt: b.clock.Now(), TTL: 90 * time.Second}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
			if !give.StoredAt.IsZero() || give.TTL != 0 {
				t.Errorf("Set modified the caller's entry: %+v", give)
			}
		}},
		{"miss is ErrNotFound", func(t *testing.T, b backend) {
			_, err := b.store.Get(ctx, testKey("acme", "r"))
			if !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get = %v, want ErrNotFound", err)
			}
		}},
		{"entry expires after its ttl", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			ttl := 50 * time.Millisecond
			mustSet(t, b.store, key, fullEntry(b.clock), ttl)
			if _, err := b.store.Get(ctx, key); err != nil {
				t.Fatalf("Get before expiry: %v", err)
			}
			b.expire(t, key, ttl)
			if _, err := b.store.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after expiry = %v, want ErrNotFound", err)
			}
		}},
		{"set replaces", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			mustSet(t, b.store, key, fullEntry(b.clock), time.Minute)
			want := &Entry{Status: 404, Body: []byte(`{"error":{}}`), StoredAt: b.clock.Now(), TTL: time.Second}
			mustSet(t, b.store, key, want, time.Second)
			got, err := b.store.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		}},
		{"delete removes keys, absent ones are fine", func(t *testing.T, b backend) {
			r, n, keep := testKey("acme", "r"), testKey("acme", "n"), testKey("other", "r")
			for _, k := range []string{r, n, keep} {
				mustSet(t, b.store, k, fullEntry(b.clock), time.Minute)
			}
			if err := b.store.Delete(ctx, r, n, testKey("absent", "r")); err != nil {
				t.Fatalf("Delete: %v", err)
			}
			if err := b.store.Delete(ctx); err != nil {
				t.Fatalf("Delete(): %v", err)
			}
			wantPresent(t, b.store, map[string]bool{r: false, n: false, keep: true})
		}},
		{"delete pattern removes only its tenant", func(t *testing.T, b backend) {
			var acme []string
			for i := range 5 {
				acme = append(acme, fmt.Sprintf("corral:v1:{acme:%064x}:r", i))
			}
			acme = append(acme, testKey("acme", "n"))
			others := []string{testKey("acme2", "r"), testKey("acme2", "n"), testKey("xacme", "r"), "corral:v1:{acme}:r"}
			want := map[string]bool{}
			for _, k := range acme {
				mustSet(t, b.store, k, fullEntry(b.clock), time.Minute)
				want[k] = false
			}
			for _, k := range others {
				mustSet(t, b.store, k, fullEntry(b.clock), time.Minute)
				want[k] = true
			}
			n, err := b.store.DeletePattern(ctx, "corral:v1:{acme:*")
			if err != nil {
				t.Fatalf("DeletePattern: %v", err)
			}
			if n != len(acme) {
				t.Errorf("DeletePattern = %d, want %d", n, len(acme))
			}
			wantPresent(t, b.store, want)
		}},
		{"delete pattern refuses the empty pattern", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			mustSet(t, b.store, key, fullEntry(b.clock), time.Minute)
			if n, err := b.store.DeletePattern(ctx, ""); !errors.Is(err, ErrEmptyPattern) || n != 0 {
				t.Fatalf("DeletePattern(\"\") = %d, %v; want 0, ErrEmptyPattern", n, err)
			}
			wantPresent(t, b.store, map[string]bool{key: true})
		}},
		{"delete pattern walks many pages", func(t *testing.T, b backend) {
			const match, other = 2*scanCount + 7, 300
			for i := range match {
				mustSet(t, b.store, fmt.Sprintf("corral:v1:{acme:%064x}:r", i), fullEntry(b.clock), time.Minute)
			}
			for i := range other {
				mustSet(t, b.store, fmt.Sprintf("corral:v1:{acme2:%064x}:r", i), fullEntry(b.clock), time.Minute)
			}
			n, err := b.store.DeletePattern(ctx, "corral:v1:{acme:*")
			if err != nil {
				t.Fatalf("DeletePattern: %v", err)
			}
			if n != match {
				t.Errorf("DeletePattern = %d, want %d", n, match)
			}
			n, err = b.store.DeletePattern(ctx, "corral:v1:{acme2:*")
			if err != nil {
				t.Fatalf("DeletePattern: %v", err)
			}
			if n != other {
				t.Errorf("second DeletePattern = %d, want %d (the first one removed another tenant's keys)", n, other)
			}
		}},
		{"large body", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			want := fullEntry(b.clock)
			want.Body = bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
			mustSet(t, b.store, key, want, time.Minute)
			got, err := b.store.Get(ctx, key)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if !bytes.Equal(got.Body, want.Body) {
				t.Errorf("Get body: %d bytes, want the %d bytes stored", len(got.Body), len(want.Body))
			}
		}},
		{"not cacheable entries are refused", func(t *testing.T, b backend) {
			key := testKey("acme", "r")
			refused := []struct {
				give *Entry
				ttl  time.Duration
			}{
				{nil, time.Minute},
				{&Entry{Status: 200}, time.Minute},
				{&Entry{Status: 200, Body: []byte{}}, time.Minute},
				{fullEntry(b.clock), 0},
				{fullEntry(b.clock), -time.Second},
			}
			for _, tt := range refused {
				if err := b.store.Set(ctx, key, tt.give, tt.ttl); !errors.Is(err, ErrNotCacheable) {
					t.Errorf("Set(%+v, %v) = %v, want ErrNotCacheable", tt.give, tt.ttl, err)
				}
			}
			wantPresent(t, b.store, map[string]bool{key: false})
		}},
	}
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					tt.run(t, bk.open(t))
				})
			}
		})
	}
}

func mustSet(t *testing.T, s Store, key string, e *Entry, ttl time.Duration) {
	t.Helper()
	if err := s.Set(context.Background(), key, e, ttl); err != nil {
		t.Fatalf("Set %s: %v", key, err)
	}
}

// wantPresent checks which keys hold an entry.
func wantPresent(t *testing.T, s Store, want map[string]bool) {
	t.Helper()
	got := map[string]bool{}
	for k := range want {
		_, err := s.Get(context.Background(), k)
		if err != nil && !errors.Is(err, ErrNotFound) {
			t.Fatalf("Get %s: %v", k, err)
		}
		got[k] = err == nil
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("present keys (-want +got):\n%s", diff)
	}
}
