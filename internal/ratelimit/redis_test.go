package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

// TestRedisConcurrentInstances: 90 concurrent requests from three gateway
// instances (three clients, three limiters) against PerMinute(30) admit
// exactly 30, and another tenant's bucket is untouched.
func TestRedisConcurrentInstances(t *testing.T) {
	srv := redistest.Start(t)
	var instances []*Redis
	for range 3 {
		instances = append(instances, NewRedis(srv.Client(), RedisOptions{}))
	}
	key := mustKey(t, "acme", Requests)
	other := mustKey(t, "globex", Requests)
	limit := PerMinute(30)
	ctx := context.Background()

	var allowedN atomic.Int64
	start := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 90)
	for i := range 90 {
		l := instances[i%3]
		wg.Go(func() {
			<-start
			r, err := l.AllowN(ctx, key, limit, 1)
			if err != nil {
				errs <- err
				return
			}
			if r.Allowed {
				allowedN.Add(1)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := allowedN.Load(); got != 30 {
		t.Fatalf("allowed %d of 90, want exactly 30", got)
	}

	r, err := instances[0].AllowN(ctx, other, limit, 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.Remaining != 29 {
		t.Fatalf("other tenant: %+v, want allowed with 29 remaining", r)
	}
}

// TestRedisServerTime runs on real redis-server with its real TIME: the
// numbers hold within generous margins, and the key expires when its bucket
// is full again.
func TestRedisServerTime(t *testing.T) {
	rdb := redistest.Client(t)
	l := NewRedis(rdb, RedisOptions{Timeout: 5 * time.Second})
	key := mustKey(t, "acme", Requests)
	ctx := context.Background()

	r, err := l.AllowN(ctx, key, PerMinute(30), 30)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.Remaining != 0 || r.ResetAfter != time.Minute {
		t.Fatalf("first 30: %+v", r)
	}
	r, err = l.AllowN(ctx, key, PerMinute(30), 1)
	if err != nil {
		t.Fatal(err)
	}
	const margin = 5 * time.Second
	if r.Allowed || r.RetryAfter <= 2*time.Second-margin || r.RetryAfter > 2*time.Second ||
		r.ResetAfter <= time.Minute-margin || r.ResetAfter > time.Minute {
		t.Fatalf("31st: %+v, want refused, RetryAfter ≈ 2s, ResetAfter ≈ 60s", r)
	}

	pttl, err := rdb.PTTL(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if pttl <= time.Minute-margin || pttl > time.Minute {
		t.Fatalf("PTTL = %v, want ≈ 60s (expire when full again)", pttl)
	}
	v, err := rdb.Get(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v, ".") || len(v[strings.Index(v, ".")+1:]) != 9 {
		t.Fatalf("stored TAT %q, want <seconds>.<9-digit ns>", v)
	}

	// A peek (n == 0) and a refusal write nothing; neither does a zero limit.
	if _, err := l.AllowN(ctx, mustKey(t, "idle", Tokens), PerMinute(100), 0); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AllowN(ctx, mustKey(t, "free", Tokens), Limit{}, 5); err != nil {
		t.Fatal(err)
	}
	if n, err := rdb.Exists(ctx, mustKey(t, "idle", Tokens), mustKey(t, "free", Tokens)).Result(); err != nil || n != 0 {
		t.Fatalf("Exists = %d, %v; want no keys for a peek or an unlimited limit", n, err)
	}
}

// TestRedisScriptFlushed: after SCRIPT FLUSH (or a server restart) EVALSHA
// fails with NOSCRIPT and the limiter falls back to EVAL transparently.
func TestRedisScriptFlushed(t *testing.T) {
	rdb := redistest.Client(t)
	l := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	key := mustKey(t, "acme", Requests)
	for i := range 3 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := l.AllowN(ctx, key, PerMinute(30), 1)
		if err != nil {
			t.Fatal(err)
		}
		if want := 29 - i; !r.Allowed || r.Remaining != want {
			t.Fatalf("call %d: %+v, want Remaining %d", i, r, want)
		}
	}
}

// TestRedisDown: the bare Redis limiter reports an outage as an error
// (Fallback is what turns it into a local answer).
func TestRedisDown(t *testing.T) {
	srv, rdb := stoppableRedis(t)
	l := NewRedis(rdb, RedisOptions{})
	srv.Stop()
	_, err := l.AllowN(context.Background(), mustKey(t, "acme", Requests), PerMinute(30), 1)
	if err == nil || !strings.HasPrefix(err.Error(), "ratelimit: redis: ") {
		t.Fatalf("err = %v, want a wrapped redis error", err)
	}
}

// TestRedisUsesServerClock: two instances whose own clocks play no part
// follow the server's TIME. miniredis is used only because SetTime moves
// that clock exactly.
func TestRedisUsesServerClock(t *testing.T) {
	mr := miniredis.RunT(t)
	start := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	mr.SetTime(start)
	var ls []*Redis
	for range 2 {
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		t.Cleanup(func() { _ = rdb.Close() })
		ls = append(ls, NewRedis(rdb, RedisOptions{}))
	}
	ctx := context.Background()
	key := mustKey(t, "acme", Requests)

	if r, err := ls[0].AllowN(ctx, key, PerMinute(30), 30); err != nil || !r.Allowed {
		t.Fatalf("burst: %+v, %v", r, err)
	}
	r, err := ls[1].AllowN(ctx, key, PerMinute(30), 1)
	if err != nil {
		t.Fatal(err)
	}
	if r.Allowed || r.RetryAfter != 2*time.Second || r.ResetAfter != time.Minute {
		t.Fatalf("refusal: %+v, want RetryAfter 2s, ResetAfter 1m exactly", r)
	}
	mr.SetTime(start.Add(2 * time.Second))
	r, err = ls[1].AllowN(ctx, key, PerMinute(30), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Allowed || r.ResetAfter != time.Minute {
		t.Fatalf("after the server clock moved 2s: %+v, want allowed", r)
	}
	got, err := mr.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d.000000000", start.Add(62*time.Second).Unix()); got != want {
		t.Fatalf("stored TAT %q, want %q", got, want)
	}
}

// TestRedisInvalidInputNoRoundTrip: invalid input is answered before any
// I/O, so it works (and fails the same way) with Redis down.
func TestRedisInvalidInputNoRoundTrip(t *testing.T) {
	mr := miniredis.RunT(t)
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	t.Cleanup(func() { _ = rdb.Close() })
	mr.SetError("ERR down")
	l := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	if _, err := l.AllowN(ctx, "k", PerMinute(30), 31); !errors.Is(err, ErrExceedsBurst) {
		t.Fatalf("err = %v, want ErrExceedsBurst", err)
	}
	if _, err := l.AllowN(ctx, "k", Limit{Rate: -1}, 1); !errors.Is(err, ErrBadLimit) {
		t.Fatalf("err = %v, want ErrBadLimit", err)
	}
	if _, err := l.AllowN(ctx, "k", PerMinute(30), 1); err == nil {
		t.Fatal("err = nil with the server answering errors")
	}
}

func mustKey(tb testing.TB, tenant string, kind Kind) string {
	tb.Helper()
	k, err := Key(tenant, kind)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// stoppableRedis starts a redis-server the test may stop, and a client
// that tries each command once: the limiter's callers are the retry
// policy.
func stoppableRedis(t *testing.T) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external redis cannot be stopped")
	}
	opt, err := redis.ParseURL(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	opt.MaxRetries = -1
	opt.DialerRetries = 1
	rdb := redis.NewClient(opt)
	t.Cleanup(func() { _ = rdb.Close() })
	return srv, rdb
}
