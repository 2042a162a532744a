package lockout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/clocktest"
	"github.com/corralhq/corral/internal/redistest"
)

func TestClient(t *testing.T) {
	tests := []struct{ give, want string }{
		{"203.0.113.7:51000", "203.0.113.7"},
		{"[::ffff:203.0.113.7]:51000", "203.0.113.7"},
		{"[2001:db8:1:2:aaaa:bbbb:cccc:dddd]:443", "2001:db8:1:2::/64"},
		{"[2001:db8:1:2::1]:443", "2001:db8:1:2::/64"},
		{"[fe80::1%eth0]:443", "fe80::/64"},
		{"127.0.0.2:1", "127.0.0.2"},
		{"@", "@"},
	}
	for _, tt := range tests {
		if got := Client(tt.give); got != tt.want {
			t.Errorf("Client(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

// attempter is one instance's view: Memory, Redis or Fallback.
type attempter func(ctx context.Context, client string, wrong bool) Verdict

// checkRule runs the rule through instances (one, or several sharing a
// store) on clock: wrong tokens spread over them in turn.
func checkRule(t *testing.T, clock *clocktest.Clock, inst ...attempter) {
	t.Helper()
	ctx := t.Context()
	on := func(i int) attempter { return inst[i%len(inst)] }
	const a, b = "198.51.100.1", "198.51.100.2"
	for i := range 4 {
		if v := on(i)(ctx, a, true); v != (Verdict{}) {
			t.Fatalf("wrong token %d: %+v; want counted, not refused", i+1, v)
		}
		clock.Advance(time.Second)
	}
	if v := on(0)(ctx, a, false); v != (Verdict{}) {
		t.Errorf("the right token after 4 wrong: %+v; want allowed", v)
	}
	if v := on(4)(ctx, a, true); v != (Verdict{Locked: true}) {
		t.Fatalf("the 5th wrong token: %+v; want it to lock the address (and be answered as wrong)", v)
	}
	for i, wrong := range []bool{false, true} {
		v := on(5+i)(ctx, a, wrong)
		if !v.Refused || v.RetryAfter != time.Minute || v.Locked {
			t.Errorf("attempt %d after the lock (wrong=%v): %+v; want refused for a minute", 6+i, wrong, v)
		}
	}
	for i := range len(inst) {
		if v := on(i)(ctx, b, false); v != (Verdict{}) {
			t.Errorf("another address's right token on instance %d: %+v; want allowed", i, v)
		}
	}
	clock.Advance(59 * time.Second)
	if v := on(0)(ctx, a, false); !v.Refused || v.RetryAfter != time.Second {
		t.Errorf("59 s into the lock: %+v; want refused for 1 s more", v)
	}
	clock.Advance(time.Second)
	for i := range len(inst) {
		if v := on(i)(ctx, a, false); v != (Verdict{}) {
			t.Errorf("the right token on instance %d once the lock ended: %+v; want allowed", i, v)
		}
	}
	// The window slides: 4 wrong, then 4 more a minute after the first
	// ones, never 5 within one minute.
	for range 2 {
		for i := range 4 {
			if v := on(i)(ctx, b, true); v.Refused || v.Locked {
				t.Fatalf("wrong token %d of 4 in a fresh window: %+v", i+1, v)
			}
		}
		clock.Advance(time.Minute)
	}
	// and 4 wrong within the last minute plus one now is a lock.
	for i := range 4 {
		on(i)(ctx, b, true)
		clock.Advance(10 * time.Second)
	}
	if v := on(0)(ctx, b, true); !v.Locked {
		t.Errorf("5 wrong within 40 s: %+v; want a lock", v)
	}
}

func memoryAttempter(m *Memory) attempter { return m.Attempt }

func redisAttempter(t *testing.T, r *Redis) attempter {
	return func(ctx context.Context, client string, wrong bool) Verdict {
		v, err := r.Attempt(ctx, client, wrong)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func TestMemoryRule(t *testing.T) {
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	checkRule(t, clock, memoryAttempter(NewMemory(MemoryOptions{Now: clock.Now})))
}

// TestRedisRuleAcrossInstances: two instances' Redis throttles on one
// real redis-server keep one count per address: wrong tokens on either
// add up, and the lock holds on both.
func TestRedisRuleAcrossInstances(t *testing.T) {
	rs := redistest.Start(t)
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	var inst []attempter
	for range 2 {
		r := NewRedis(rs.Client(), RedisOptions{})
		r.now = clock.Now
		inst = append(inst, redisAttempter(t, r))
	}
	checkRule(t, clock, inst...)
}

// TestRedisKeysExpire: an address's keys carry a TTL, the window's or
// the lock's, on Redis's own clock, and are hash-tagged by address.
func TestRedisKeysExpire(t *testing.T) {
	rdb := redistest.Client(t)
	r := NewRedis(rdb, RedisOptions{})
	ctx := t.Context()
	for range 4 {
		if _, err := r.Attempt(ctx, "192.0.2.9", true); err != nil {
			t.Fatal(err)
		}
	}
	fails, until := KeyPrefix+"{192.0.2.9}:fails", KeyPrefix+"{192.0.2.9}:until"
	if ttl := rdb.PTTL(ctx, fails).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the wrong tokens' key: TTL %v; want within a minute", ttl)
	}
	if n := rdb.ZCard(ctx, fails).Val(); n != 4 {
		t.Errorf("the wrong tokens' key holds %d; want 4", n)
	}
	if v, err := r.Attempt(ctx, "192.0.2.9", true); err != nil || !v.Locked {
		t.Fatalf("5th wrong: %+v, %v", v, err)
	}
	if n := rdb.Exists(ctx, fails).Val(); n != 0 {
		t.Error("the wrong tokens' key outlived the lock it made")
	}
	if ttl := rdb.PTTL(ctx, until).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("the lock's key: TTL %v; want within a minute", ttl)
	}
	v, err := r.Attempt(ctx, "192.0.2.9", false)
	if err != nil || !v.Refused || v.RetryAfter <= 0 || v.RetryAfter > time.Minute {
		t.Errorf("the right token while locked, on Redis's clock: %+v, %v; want refused", v, err)
	}
}

// TestMemoryBounded: a flood of addresses, each with a wrong token,
// keeps the map at its bound and never evicts a lock while an entry
// without one is there to forget.
func TestMemoryBounded(t *testing.T) {
	clock := clocktest.New(time.Unix(1_800_000_000, 0))
	m := NewMemory(MemoryOptions{Now: clock.Now, MaxClients: 100})
	ctx := t.Context()
	for range 5 {
		m.Attempt(ctx, "locked", true)
	}
	for i := range 10_000 {
		m.Attempt(ctx, fmt.Sprintf("10.0.%d.%d", i/256, i%256), true)
	}
	if n := m.Len(); n > 100 {
		t.Errorf("%d addresses held; the bound is 100", n)
	}
	if v := m.Attempt(ctx, "locked", false); !v.Refused {
		t.Errorf("the locked address after the flood: %+v; want still refused", v)
	}
	clock.Advance(2 * time.Minute)
	m.Attempt(ctx, "after", true) // a new address sweeps the full map
	if n := m.Len(); n != 1 {
		t.Errorf("%d addresses held once every entry expired; want 1", n)
	}
}
