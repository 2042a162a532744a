package lockout

import (
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/breaker"
	"github.com/corralhq/corral/internal/clocktest"
	"github.com/corralhq/corral/internal/redistest"
)

// newFallback is one instance's Fallback on rs, with its own breaker, on
// clock.
func newFallback(t *testing.T, rs *redistest.Server, clock *clocktest.Clock) *Fallback {
	t.Helper()
	r := NewRedis(rs.Client(), RedisOptions{Timeout: 250 * time.Millisecond})
	r.now = clock.Now
	b := breaker.New(breaker.Options{TripAfter: 1, Now: clock.Now})
	return NewFallback(r, NewMemory(MemoryOptions{Now: clock.Now}), b)
}

// TestFallbackSharesOneCount: with Redis up, two instances' Fallbacks
// follow the rule as one.
func TestFallbackSharesOneCount(t *testing.T) {
	rs := redistest.Start(t)
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	checkRule(t, clock, newFallback(t, rs, clock).Attempt, newFallback(t, rs, clock).Attempt)
}

// TestFallbackRedisDown: with Redis stopped, an instance's own count
// still locks an address out after 5 wrong tokens, the right token then
// refused too; another address is unaffected.
func TestFallbackRedisDown(t *testing.T) {
	rs := redistest.Start(t)
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	f := newFallback(t, rs, clock)
	rs.Stop()
	checkRule(t, clock, f.Attempt)
}

// TestFallbackRedisRefusing: a Redis that answers but refuses the
// script's writes (a replica, READONLY, as after a failover's demotion)
// is no throttle: the local count holds.
func TestFallbackRedisRefusing(t *testing.T) {
	rs := redistest.Start(t)
	rdb := rs.Client()
	ctx := t.Context()
	if err := rdb.ReplicaOf(ctx, "127.0.0.1", "1").Err(); err != nil { // a master that is not there
		t.Fatal(err)
	}
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	f := newFallback(t, rs, clock)
	if _, err := f.primary.Attempt(ctx, "192.0.2.1", true); err == nil || !strings.Contains(err.Error(), "READONLY") {
		t.Fatalf("a wrong token on a replica: %v; the test needs Redis to refuse it", err)
	}
	checkRule(t, clock, f.Attempt)
}

// TestFallbackRemembersRedisLock: a lock Redis reports (made by wrong
// tokens on another instance) holds on this instance without a round
// trip: it still refuses once Redis is gone, until the lock ends. And
// wrong tokens counted while Redis was up still count once it is down.
func TestFallbackRemembersRedisLock(t *testing.T) {
	rs := redistest.Start(t)
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	a, b := newFallback(t, rs, clock), newFallback(t, rs, clock)
	ctx := t.Context()
	for range 5 {
		a.Attempt(ctx, "192.0.2.1", true)
	}
	if v := b.Attempt(ctx, "192.0.2.1", false); !v.Refused {
		t.Fatalf("instance B, right token, after 5 wrong on A: %+v; want refused", v)
	}
	for range 3 {
		b.Attempt(ctx, "192.0.2.2", true)
	}
	rs.Stop()
	clock.Advance(30 * time.Second)
	if v := b.Attempt(ctx, "192.0.2.1", false); !v.Refused || v.RetryAfter != 30*time.Second {
		t.Errorf("instance B with Redis down, 30 s into the lock: %+v; want refused for 30 s more", v)
	}
	b.Attempt(ctx, "192.0.2.2", true)
	if v := b.Attempt(ctx, "192.0.2.2", true); !v.Locked {
		t.Errorf("3 wrong with Redis up and 2 with it down: %+v; want the 5th to lock", v)
	}
	clock.Advance(30 * time.Second)
	if v := b.Attempt(ctx, "192.0.2.1", false); v.Refused {
		t.Errorf("instance B once the lock ended: %+v; want allowed", v)
	}
}
