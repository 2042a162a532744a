package redislock

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

const lockName = "corral:v1:{acme:0123abcd}:l"

// acquire takes lockName or fails the test, and releases it at cleanup.
func acquire(tb testing.TB, l *Locker) *Lease {
	tb.Helper()
	le, ok, err := l.TryAcquire(context.Background(), lockName)
	if err != nil || !ok {
		tb.Fatalf("TryAcquire = ok %v, err %v; want ok", ok, err)
	}
	tb.Cleanup(func() { _ = le.Release(context.Background()) })
	return le
}

func TestTryAcquireIsExclusive(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	a := NewLocker(rdb, Options{})
	b := NewLocker(rdb, Options{}) // another instance

	first := acquire(t, a)
	if le, ok, err := b.TryAcquire(ctx, lockName); ok || err != nil || le != nil {
		t.Fatalf("second TryAcquire while held = %v, %v, %v; want nil, false, nil", le, ok, err)
	}
	if held, err := b.Held(ctx, lockName); !held || err != nil {
		t.Fatalf("Held while held = %v, %v; want true", held, err)
	}
	if err := first.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if held, err := b.Held(ctx, lockName); held || err != nil {
		t.Fatalf("Held after release = %v, %v; want false", held, err)
	}
	second := acquire(t, b)

	// Release is idempotent: releasing the first lease again must not
	// touch the second holder's lock.
	if err := first.Release(ctx); err != nil {
		t.Fatalf("second Release: %v", err)
	}
	if got := rdb.Get(ctx, lockName).Val(); got != second.token {
		t.Fatalf("lock after repeated Release = %q, want second holder's %q", got, second.token)
	}
}

func TestReleaseKeepsSuccessorsLock(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	le := acquire(t, NewLocker(rdb, Options{TTL: 300 * time.Millisecond}))

	// Our lock vanished (expired) and another instance took it.
	rdb.Del(ctx, lockName)
	if err := rdb.Set(ctx, lockName, "successor", 10*time.Second).Err(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, le.Lost(), time.Second, "Lost after takeover")
	if err := le.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if got := rdb.Get(ctx, lockName).Val(); got != "successor" {
		t.Fatalf("lock after Release = %q, want successor's lock kept", got)
	}
}

func TestRenewalKeepsLockPastTTL(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	// Short enough to watch several TTLs pass, long enough that a renewal
	// every TTL/3 survives a busy CI machine running the race detector.
	const ttl = 600 * time.Millisecond
	le := acquire(t, NewLocker(rdb, Options{TTL: ttl}))

	// Watch the key for more than three TTLs: it must stay ours throughout.
	for end := time.Now().Add(3*ttl + ttl/2); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		tok, err := rdb.Get(ctx, lockName).Result()
		if err != nil || tok != le.token {
			t.Fatalf("lock = %q, %v; want our token %q", tok, err, le.token)
		}
		if pttl := rdb.PTTL(ctx, lockName).Val(); pttl <= 0 || pttl > ttl {
			t.Fatalf("PTTL = %v, want in (0, %v]", pttl, ttl)
		}
	}
	if isClosed(le.Lost()) {
		t.Fatal("Lost closed while the lock was renewed")
	}
	if err := le.Release(ctx); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := rdb.Exists(ctx, lockName).Val(); n != 0 {
		t.Fatalf("EXISTS after Release = %d, want 0", n)
	}
}

func TestLostWhenDeleted(t *testing.T) {
	rdb := redistest.Start(t).Client()
	const ttl = 300 * time.Millisecond
	le := acquire(t, NewLocker(rdb, Options{TTL: ttl}))
	rdb.Del(context.Background(), lockName)
	// Noticed at the next renewal, TTL/3 later; the slack is for busy machines.
	waitClosed(t, le.Lost(), ttl+time.Second, "Lost after DEL")
}

func TestDeadHolderExpires(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Start(t).Client()
	const ttl = 300 * time.Millisecond
	// A holder that died right after SET NX PX: nobody renews its lock.
	if err := rdb.SetNX(ctx, lockName, "dead-instance", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l := NewLocker(rdb, Options{TTL: ttl})
	var le *Lease
	eventually(t, ttl+2*time.Second, "TryAcquire after the dead holder's TTL", func() bool {
		var ok bool
		var err error
		le, ok, err = l.TryAcquire(ctx, lockName)
		if err != nil {
			t.Fatalf("TryAcquire: %v", err)
		}
		return ok
	})
	defer le.Release(ctx)
	if waited := time.Since(start); waited < ttl/2 {
		t.Fatalf("acquired after %v, before the dead holder's lock could expire", waited)
	}
}

// TestRenewalRetriesRedisErrors injects errors (miniredis: a real server
// cannot fail commands on demand without losing its data) for less than a
// TTL: the lease must retry, not give up, and renew again afterwards.
func TestRenewalRetriesRedisErrors(t *testing.T) {
	m := miniredis.RunT(t)
	rdb := &scriptErrCounter{Client: redis.NewClient(&redis.Options{Addr: m.Addr()})}
	defer rdb.Close()
	const ttl = time.Second
	le := acquire(t, NewLocker(rdb, Options{TTL: ttl, OpTimeout: 100 * time.Millisecond}))

	m.SetError("ERR injected outage")
	eventually(t, ttl/2, "a failed renewal", func() bool { return rdb.errs.Load() > 0 })
	m.FastForward(ttl - 100*time.Millisecond)
	m.SetError("")

	// miniredis time only moves by FastForward, so a TTL back at the full
	// TTL proves a renewal succeeded after the errors.
	eventually(t, ttl, "renewal after the errors", func() bool { return m.TTL(lockName) == ttl })
	if isClosed(le.Lost()) {
		t.Fatal("Lost closed after errors shorter than the TTL")
	}
}

// scriptErrCounter counts failed script runs, so a test knows a renewal
// has met the injected error instead of guessing with a sleep.
type scriptErrCounter struct {
	*redis.Client
	errs atomic.Int64
}

func (c *scriptErrCounter) EvalSha(ctx context.Context, sha1 string, keys []string, args ...any) *redis.Cmd {
	return c.count(c.Client.EvalSha(ctx, sha1, keys, args...))
}

func (c *scriptErrCounter) Eval(ctx context.Context, script string, keys []string, args ...any) *redis.Cmd {
	return c.count(c.Client.Eval(ctx, script, keys, args...))
}

func (c *scriptErrCounter) count(cmd *redis.Cmd) *redis.Cmd {
	if err := cmd.Err(); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		c.errs.Add(1)
	}
	return cmd
}

func TestLostAfterTTLOfRedisErrors(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external server")
	}
	rdb := srv.Client()
	const ttl = 600 * time.Millisecond
	le := acquire(t, NewLocker(rdb, Options{TTL: ttl, OpTimeout: 50 * time.Millisecond}))

	// Stop Redis right after a renewal (or the acquire), so the lease's
	// last success is now and its TTL runs from here.
	eventually(t, ttl, "a fresh renewal", func() bool { return rdb.PTTL(ctx, lockName).Val() > ttl-50*time.Millisecond })
	srv.Stop()
	stopped := time.Now()
	waitClosed(t, le.Lost(), ttl+2*time.Second, "Lost during an outage")
	// Renewals fail from TTL/3 on; giving up at the first of them would
	// mean a Redis error was taken for a lost lock.
	if d := time.Since(stopped); d < ttl/2 {
		t.Fatalf("Lost after %v of errors, want about the TTL (%v)", d, ttl)
	}
}

func TestRedisDownFailsFast(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external server")
	}
	const opTimeout = 200 * time.Millisecond
	l := NewLocker(srv.Client(), Options{OpTimeout: opTimeout})
	le := acquire(t, l)
	srv.Stop()

	tests := []struct {
		give string
		call func() error
	}{
		{"TryAcquire", func() error {
			le, ok, err := l.TryAcquire(ctx, "other")
			if le != nil || ok {
				t.Errorf("TryAcquire = %v, %v; want nil, false", le, ok)
			}
			return err
		}},
		{"Held", func() error { _, err := l.Held(ctx, lockName); return err }},
		{"Release", func() error { return le.Release(ctx) }},
	}
	for _, tt := range tests {
		start := time.Now()
		err := tt.call()
		if err == nil {
			t.Errorf("%s with Redis down: nil error", tt.give)
		}
		if d := time.Since(start); d > opTimeout+300*time.Millisecond {
			t.Errorf("%s with Redis down took %v, want ≤ OpTimeout %v", tt.give, d, opTimeout)
		}
	}
}

// TestHungRedisBoundedByOpTimeout uses a peer that accepts connections and
// never answers (a hung server or a black-holed network), which no real
// redis-server can be made to do from here. The client is built with
// ContextTimeoutEnabled, as the package doc asks.
func TestHungRedisBoundedByOpTimeout(t *testing.T) {
	addr := blackHole(t)
	rdb := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	const opTimeout = 100 * time.Millisecond
	l := NewLocker(rdb, Options{OpTimeout: opTimeout})

	start := time.Now()
	_, ok, err := l.TryAcquire(context.Background(), lockName)
	if ok || !errors.Is(err, context.DeadlineExceeded) && !isTimeout(err) {
		t.Fatalf("TryAcquire on a hung server = %v, %v; want a timeout", ok, err)
	}
	if d := time.Since(start); d > opTimeout+300*time.Millisecond {
		t.Fatalf("TryAcquire on a hung server took %v, want ≤ OpTimeout %v", d, opTimeout)
	}
}

// blackHole listens on a loopback port, accepts connections and never
// replies. It stops at cleanup.
func blackHole(tb testing.TB) string {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex // protects conns
	var conns []net.Conn
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Go(func() { _, _ = c.Read(make([]byte, 1<<16)) })
		}
	})
	tb.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestNewLockerPanicsOnMisuse(t *testing.T) {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	defer rdb.Close()
	tests := []struct {
		give string
		rdb  LockClient
		opts Options
	}{
		{"nil client", nil, Options{}},
		{"tiny TTL", rdb, Options{TTL: time.Millisecond}},
		{"negative OpTimeout", rdb, Options{OpTimeout: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.give, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			NewLocker(tt.rdb, tt.opts)
		})
	}
}
