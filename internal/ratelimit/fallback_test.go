package ratelimit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/logtest"
)

// TestFallbackRedisOutage stops a real redis-server under a Fallback: it
// keeps answering from the local limiter without an error, reports
// unhealthy, logs once, and after a restart and the backoff (driven by a
// fake clock, no sleeping) goes back to Redis.
func TestFallbackRedisOutage(t *testing.T) {
	srv, rdb := stoppableRedis(t)

	clock := newFakeClock()
	var logs logtest.Buffer
	local := NewMemory(MemoryOptions{Now: clock.Now})
	f := NewFallback(NewRedis(rdb, RedisOptions{}), local,
		slog.New(slog.NewTextHandler(&logs, nil)), FallbackOptions{Backoff: time.Second, Now: clock.Now})
	ctx := context.Background()
	key := mustKey(t, "acme", Requests)
	limit := PerMinute(30)

	mustAllow := func(wantRemaining int) {
		t.Helper()
		r, err := f.AllowN(ctx, key, limit, 1)
		if err != nil {
			t.Fatalf("AllowN: %v", err)
		}
		if !r.Allowed || r.Remaining != wantRemaining {
			t.Fatalf("AllowN = %+v, want allowed with %d remaining", r, wantRemaining)
		}
	}

	for i := range 10 { // Redis holds 10 taken
		mustAllow(29 - i)
	}
	if !f.Healthy() || local.Len() != 0 {
		t.Fatalf("before the outage: Healthy %v, local keys %d", f.Healthy(), local.Len())
	}

	srv.Stop()
	mustAllow(29) // from the fresh local bucket, not an error
	if f.Healthy() {
		t.Fatal("Healthy() = true with redis down")
	}
	for i := range 5 { // within the backoff: local only, no new log line
		mustAllow(28 - i)
	}
	clock.Advance(time.Second) // a probe fails: still local, still one Warn
	mustAllow(23)
	if got := logs.Count("level=WARN"); got != 1 {
		t.Fatalf("%d Warn lines, want 1:\n%s", got, logs.String())
	}
	if got := logs.Count("level=INFO"); got != 0 {
		t.Fatalf("Info logged while down:\n%s", logs.String())
	}

	srv.Restart() // back, and empty
	check := srv.Client()
	if n, _ := check.Exists(ctx, key).Result(); n != 0 {
		t.Fatal("restarted redis is not empty")
	}
	// Advance past the backoff and ask until a probe reaches Redis. One
	// probe is normally enough; the loop, bounded by a deadline, only
	// absorbs a stale pooled connection. The clock, not sleeping, drives it.
	deadline := time.Now().Add(5 * time.Second)
	for !f.Healthy() && time.Now().Before(deadline) {
		clock.Advance(time.Second)
		if _, err := f.AllowN(ctx, key, limit, 1); err != nil {
			t.Fatal(err)
		}
	}
	if !f.Healthy() {
		t.Fatalf("Fallback did not return to redis:\n%s", logs.String())
	}
	if n, err := check.Exists(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("key in redis after recovery: %d, %v; want it written there", n, err)
	}
	if got := logs.Count("level=INFO"); got != 1 {
		t.Fatalf("%d Info lines, want 1:\n%s", got, logs.String())
	}
}

// fakeLimiter is a Limiter of function fields, one per method.
type fakeLimiter struct {
	allowN  func(ctx context.Context, key string, limit Limit, n int) (Result, error)
	chargeN func(ctx context.Context, key string, limit Limit, n int) (Result, error)
}

var _ Limiter = (*fakeLimiter)(nil)

func (f *fakeLimiter) AllowN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	if f.allowN == nil {
		panic("fakeLimiter: unexpected AllowN")
	}
	return f.allowN(ctx, key, limit, n)
}

func (f *fakeLimiter) ChargeN(ctx context.Context, key string, limit Limit, n int) (Result, error) {
	if f.chargeN == nil {
		panic("fakeLimiter: unexpected ChargeN")
	}
	return f.chargeN(ctx, key, limit, n)
}

// failing is a primary that counts its calls and fails while down is true.
type failing struct {
	mu    sync.Mutex // protects calls and down
	calls int
	down  bool
}

func (p *failing) limiter() *fakeLimiter {
	take := func(_ context.Context, _ string, limit Limit, _ int) (Result, error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		p.calls++
		if p.down {
			return Result{}, errors.New("redis: connection refused")
		}
		return Result{Limit: limit, Allowed: true, Remaining: 1000}, nil
	}
	return &fakeLimiter{allowN: take, chargeN: take}
}

func (p *failing) set(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
}

func (p *failing) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// TestFallbackProbesOncePerBackoff: while down, the primary is asked once
// per backoff, not once per request, and ChargeN falls back like AllowN.
func TestFallbackProbesOncePerBackoff(t *testing.T) {
	clock := newFakeClock()
	p := &failing{down: true}
	f := NewFallback(p.limiter(), NewMemory(MemoryOptions{Now: clock.Now}), nil,
		FallbackOptions{Backoff: 500 * time.Millisecond, Now: clock.Now})
	ctx := context.Background()
	for range 100 {
		if _, err := f.AllowN(ctx, "k", PerMinute(1000), 1); err != nil {
			t.Fatal(err)
		}
		if _, err := f.ChargeN(ctx, "k", PerMinute(1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.count(); got != 1 {
		t.Fatalf("primary asked %d times within one backoff, want 1", got)
	}
	clock.Advance(500 * time.Millisecond)
	for range 100 {
		if _, err := f.AllowN(ctx, "k", PerMinute(1000), 1); err != nil {
			t.Fatal(err)
		}
	}
	if got := p.count(); got != 2 {
		t.Fatalf("primary asked %d times after one backoff, want 2", got)
	}
	p.set(false)
	clock.Advance(500 * time.Millisecond)
	r, err := f.AllowN(ctx, "k", PerMinute(1000), 1)
	if err != nil {
		t.Fatal(err)
	}
	if !f.Healthy() || r.Remaining != 1000 {
		t.Fatalf("after recovery: Healthy %v, %+v; want the primary's answer", f.Healthy(), r)
	}
}

// TestFallbackCallerErrors: invalid input and a caller that went away are
// not Redis faults: they neither mark the primary down nor reach it.
func TestFallbackCallerErrors(t *testing.T) {
	clock := newFakeClock()
	p := &failing{down: true}
	f := NewFallback(p.limiter(), NewMemory(MemoryOptions{Now: clock.Now}), nil,
		FallbackOptions{Now: clock.Now})

	if _, err := f.AllowN(context.Background(), "k", PerMinute(30), 31); !errors.Is(err, ErrExceedsBurst) {
		t.Fatalf("err = %v, want ErrExceedsBurst", err)
	}
	if _, err := f.AllowN(context.Background(), "k", Limit{Rate: 1}, 1); !errors.Is(err, ErrBadLimit) {
		t.Fatalf("err = %v, want ErrBadLimit", err)
	}
	if r, err := f.AllowN(context.Background(), "k", Limit{}, 1); err != nil || !r.Allowed {
		t.Fatalf("unlimited: %+v, %v", r, err)
	}
	if got := p.count(); got != 0 {
		t.Fatalf("primary asked %d times for input it could not accept", got)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r, err := f.AllowN(ctx, "k", PerMinute(30), 1)
	if err != nil || !r.Allowed {
		t.Fatalf("cancelled caller: %+v, %v; want the local answer", r, err)
	}
	if !f.Healthy() {
		t.Fatal("a cancelled caller marked the primary down")
	}
}
