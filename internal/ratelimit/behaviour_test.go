package ratelimit

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/redistest"
)

// impl sets up one implementation for a test and returns a constructor of
// limiters on a clock. Both implementations run the same table: memory
// directly on the fake clock, Redis on a real redis-server whose script takes
// the fake clock instead of TIME (the test hook Redis.now), so the
// comparisons are exact.
type impl struct {
	name  string
	setup func(t *testing.T) func(clock *fakeClock) Limiter
}

var impls = []impl{
	{"memory", func(t *testing.T) func(clock *fakeClock) Limiter {
		return func(clock *fakeClock) Limiter { return NewMemory(MemoryOptions{Now: clock.Now}) }
	}},
	{"redis", func(t *testing.T) func(clock *fakeClock) Limiter {
		rdb := redistest.Start(t).Client()
		return func(clock *fakeClock) Limiter {
			r := NewRedis(rdb, RedisOptions{})
			r.now = clock.Now
			return r
		}
	}},
}

// step is one call; with times > 1 it is repeated and want applies to the
// last call.
type step struct {
	advance time.Duration // move the clock first
	charge  bool          // ChargeN instead of AllowN
	key     string        // "" is "a"
	n       int
	times   int
	want    Result // Limit is filled in from the case
	wantErr error
}

func allowed(remaining int, reset time.Duration) Result {
	return Result{Allowed: true, Remaining: remaining, ResetAfter: reset}
}

func refused(remaining int, retry, reset time.Duration) Result {
	return Result{Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

func TestBehaviour(t *testing.T) {
	const s = time.Second
	tests := []struct {
		name  string
		limit Limit
		steps []step
	}{
		{
			name:  "burst of exactly Burst then refused",
			limit: PerMinute(30),
			steps: []step{
				{n: 1, times: 30, want: allowed(0, 60*s)},
				{n: 1, want: refused(0, 2*s, 60*s)},
				{n: 1, want: refused(0, 2*s, 60*s)},
			},
		},
		{
			name:  "remaining decreases and refills",
			limit: PerMinute(30),
			steps: []step{
				{n: 1, want: allowed(29, 2*s)},
				{n: 5, want: allowed(24, 12*s)},
				{advance: 4 * s, n: 1, want: allowed(25, 10*s)},
				{n: 0, want: allowed(25, 10*s)},
				{advance: 10 * s, n: 0, want: allowed(30, 0)},
			},
		},
		{
			name:  "allowed again once RetryAfter elapsed",
			limit: PerMinute(30),
			steps: []step{
				{n: 30, want: allowed(0, 60*s)},
				{n: 1, want: refused(0, 2*s, 60*s)},
				{advance: 2*s - time.Millisecond, n: 1, want: refused(0, time.Millisecond, 60*s-2*s+time.Millisecond)},
				{advance: time.Millisecond, n: 1, want: allowed(0, 60*s)},
				{n: 1, want: refused(0, 2*s, 60*s)},
			},
		},
		{
			name:  "a refused n reports what does remain",
			limit: PerMinute(30),
			steps: []step{
				{n: 27, want: allowed(3, 54*s)},
				{n: 5, want: refused(3, 4*s, 54*s)},
				{n: 3, want: allowed(0, 60*s)},
			},
		},
		{
			name:  "full again after a quiet period",
			limit: PerMinute(30),
			steps: []step{
				{n: 30, want: allowed(0, 60*s)},
				{advance: 60 * s, n: 30, want: allowed(0, 60*s)},
				{advance: 10 * time.Minute, n: 1, want: allowed(29, 2*s)},
			},
		},
		{
			name:  "ChargeN debt delays later requests",
			limit: PerMinute(30),
			steps: []step{
				{charge: true, n: 90, want: allowed(0, 180*s)},
				{n: 1, want: refused(0, 122*s, 180*s)},
				{advance: 122*s - time.Millisecond, n: 1, want: refused(0, time.Millisecond, 58*s+time.Millisecond)},
				{advance: time.Millisecond, n: 1, want: allowed(0, 60*s)},
			},
		},
		{
			name:  "ChargeN on top of a partly used bucket",
			limit: PerMinute(30),
			steps: []step{
				{n: 10, want: allowed(20, 20*s)},
				{charge: true, n: 25, want: allowed(0, 70*s)},
				{n: 1, want: refused(0, 12*s, 70*s)},
			},
		},
		{
			name:  "n over Burst never fits and takes nothing",
			limit: PerMinute(30),
			steps: []step{
				{n: 31, want: Result{}, wantErr: ErrExceedsBurst},
				{n: 30, want: allowed(0, 60*s)},
				{charge: true, n: 31, want: allowed(0, 122*s)},
			},
		},
		{
			name:  "two keys are independent",
			limit: PerMinute(30),
			steps: []step{
				{key: "a", n: 30, want: allowed(0, 60*s)},
				{key: "a", n: 1, want: refused(0, 2*s, 60*s)},
				{key: "b", n: 1, want: allowed(29, 2*s)},
			},
		},
		{
			name:  "burst below rate spreads requests",
			limit: Limit{Rate: 60, Burst: 10, Period: time.Minute},
			steps: []step{
				{n: 1, times: 10, want: allowed(0, 10*s)},
				{n: 1, want: refused(0, s, 10*s)},
				{advance: s, n: 1, want: allowed(0, 10*s)},
			},
		},
		{
			name:  "emission interval that is not whole nanoseconds",
			limit: PerMinute(7), // 8 571 428 571.43 ns per unit, charged as 8 571 428 571
			steps: []step{
				{n: 1, times: 7, want: allowed(0, 59_999_999_997)},
				{n: 1, want: refused(0, 8_571_428_568, 59_999_999_997)},
				{advance: 8_571_428_568, n: 1, want: allowed(0, 60*s)},
			},
		},
		{
			name:  "tokens per minute",
			limit: PerMinute(200_000), // 300 µs per token
			steps: []step{
				{n: 150_000, want: allowed(50_000, 45*s)},
				{n: 60_000, want: refused(50_000, 3*s, 45*s)},
				{advance: 3 * s, n: 60_000, want: allowed(0, 60*s)},
			},
		},
		{
			name:  "zero limit is unlimited",
			limit: Limit{},
			steps: []step{
				{n: 1_000_000, times: 3, want: Result{Allowed: true}},
				{charge: true, n: 1_000_000, want: Result{Allowed: true}},
			},
		},
		{
			name:  "invalid limit",
			limit: Limit{Rate: 30},
			steps: []step{
				{n: 1, want: Result{}, wantErr: ErrBadLimit},
			},
		},
		{
			name:  "negative n",
			limit: PerMinute(30),
			steps: []step{
				{n: -1, want: Result{}, wantErr: errNegativeN},
				{charge: true, n: -1, want: Result{}, wantErr: errNegativeN},
			},
		},
	}
	for _, im := range impls {
		t.Run(im.name, func(t *testing.T) {
			newLimiter := im.setup(t)
			for _, tt := range tests {
				t.Run(tt.name, func(t *testing.T) {
					clock := newFakeClock()
					l := newLimiter(clock)
					ctx := context.Background()
					for i, st := range tt.steps {
						clock.Advance(st.advance)
						key := "test:{" + t.Name() + "}:" + st.key
						take := l.AllowN
						if st.charge {
							take = l.ChargeN
						}
						var got Result
						var err error
						for range max(st.times, 1) {
							got, err = take(ctx, key, tt.limit, st.n)
						}
						if !errors.Is(err, st.wantErr) {
							t.Fatalf("step %d: err = %v, want %v", i, err, st.wantErr)
						}
						want := st.want
						want.Limit = tt.limit
						if diff := cmp.Diff(want, got); diff != "" {
							t.Fatalf("step %d (%+v): result mismatch (-want +got):\n%s", i, st, diff)
						}
					}
				})
			}
		})
	}
}
