package cache

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

func TestRedisSetUsesPX(t *testing.T) {
	rdb := redistest.Client(t)
	s := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	key := testKey("acme", "r")

	mustSet(t, s, key, fullEntry(newFakeClock()), 1500*time.Millisecond)
	pttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatalf("PTTL: %v", err)
	}
	if pttl <= time.Second || pttl > 1500*time.Millisecond {
		t.Errorf("PTTL = %v, want in (1s, 1.5s]: the ttl must keep its milliseconds", pttl)
	}
}

func TestRedisCorruptValueIsMiss(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"garbage", "not an entry"},
		{"empty", ""},
		{"future version", "\xc2\x90\x03"},
		{"truncated", string(Marshal(fullEntry(newFakeClock()))[:20])},
	}
	rdb := redistest.Client(t)
	s := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			key := testKey("acme", "r")
			if err := rdb.Set(ctx, key, tt.give, time.Minute).Err(); err != nil {
				t.Fatalf("SET: %v", err)
			}
			_, err := s.Get(ctx, key)
			if !errors.Is(err, ErrNotFound) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Get = %v, want an error matching ErrNotFound and ErrCorrupt", err)
			}
			if n, err := rdb.Exists(ctx, key).Result(); err != nil || n != 1 {
				t.Errorf("EXISTS = %d, %v; a corrupt value must be left for a newer reader", n, err)
			}
		})
	}
}

// TestRedisOutage: with the server gone every call fails fast with an error
// that is not a miss, so the caller can tell "down" from "absent".
func TestRedisOutage(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external server cannot be stopped")
	}
	const opTimeout = 100 * time.Millisecond
	s := NewRedis(srv.Client(), RedisOptions{OpTimeout: opTimeout})
	ctx := context.Background()
	key := testKey("acme", "r")
	mustSet(t, s, key, fullEntry(newFakeClock()), time.Minute)
	srv.Stop()

	calls := []struct {
		name string
		call func() error
	}{
		{"Get", func() error { _, err := s.Get(ctx, key); return err }},
		{"Set", func() error { return s.Set(ctx, key, fullEntry(newFakeClock()), time.Minute) }},
		{"Delete", func() error { return s.Delete(ctx, key) }},
		{"DeletePattern", func() error { _, err := s.DeletePattern(ctx, "corral:v1:{acme:*"); return err }},
	}
	for _, tt := range calls {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Now()
			err := tt.call()
			elapsed := time.Since(start)
			if err == nil || errors.Is(err, ErrNotFound) {
				t.Fatalf("err = %v, want a Redis error", err)
			}
			if elapsed > opTimeout+500*time.Millisecond {
				t.Errorf("took %v with OpTimeout %v", elapsed, opTimeout)
			}
		})
	}
}

// TestRedisOpTimeoutUnresponsiveServer: a server that accepts connections but
// never answers (a hung or partitioned Redis) is bounded by OpTimeout, or by
// an earlier ctx deadline, instead of go-redis's 3s ReadTimeout.
func TestRedisOpTimeoutUnresponsiveServer(t *testing.T) {
	addr := blackhole(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = rdb.Close() })

	tests := []struct {
		name      string
		opTimeout time.Duration
		ctxAfter  time.Duration
	}{
		{"OpTimeout", 100 * time.Millisecond, time.Minute},
		{"earlier ctx deadline", time.Minute, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewRedis(rdb, RedisOptions{OpTimeout: tt.opTimeout})
			ctx, cancel := context.WithTimeout(context.Background(), tt.ctxAfter)
			defer cancel()
			start := time.Now()
			_, err := s.Get(ctx, testKey("acme", "r"))
			elapsed := time.Since(start)
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("Get = %v, want context.DeadlineExceeded", err)
			}
			if elapsed > time.Second {
				t.Errorf("Get took %v, want about 100ms", elapsed)
			}
		})
	}
}

// blackhole listens on a free port and holds every connection open without
// answering, until the test ends.
func blackhole(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex // protects conns
		conns []net.Conn
	)
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	})
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return l.Addr().String()
}

func TestNewRedisDefaults(t *testing.T) {
	s := NewRedis(nil, RedisOptions{})
	if s.opTimeout != DefaultOpTimeout || s.now == nil {
		t.Errorf("defaults: opTimeout %v, now set %v", s.opTimeout, s.now != nil)
	}
}

func BenchmarkRedisGetHit(b *testing.B) {
	s := NewRedis(redistest.Client(b), RedisOptions{})
	ctx := context.Background()
	key := testKey("acme", "r")
	if err := s.Set(ctx, key, benchEntry(), time.Hour); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Get(ctx, key); err != nil {
			b.Fatal(err)
		}
	}
}
