package usage

import (
	"context"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

// TestRedisFlushSurvivesAnOverflowingFigure: a usage figure no upstream
// can mean (2^63−1 tokens) in a flush with an unrelated tenant's call
// must not poison the flush: the unrelated call is counted exactly once
// however many flushes follow, in the totals and in its day's rows, and
// the huge figure is kept at the bound instead of overflowing.
func TestRedisFlushSurvivesAnOverflowingFigure(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	now := func() time.Time { return time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) }
	r := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour, Now: now})
	defer r.Close()
	r.Add("huge", Counters{Requests: 1, TokensUsed: 10, ByModel: map[string]ModelCounters{"gpt-4o": {Requests: 1, InputTokens: 10}}})
	if err := r.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	r.Add("huge", Counters{Requests: 1, UpstreamCalls: 1, TokensUsed: math.MaxInt64,
		ByModel: map[string]ModelCounters{"gpt-4o": {Requests: 1, UpstreamCalls: 1, InputTokens: math.MaxInt64}}})
	r.Add("huge", Counters{TokensUsed: math.MaxInt64}) // adds up past int64 in process too
	r.Add("other", Counters{Requests: 1, UpstreamCalls: 1, TokensUsed: 42,
		ByModel: map[string]ModelCounters{"gpt-4o-mini": {Requests: 1, UpstreamCalls: 1, InputTokens: 42}}})
	for i := range 5 { // five flush intervals
		if err := r.Flush(ctx); err != nil {
			t.Errorf("flush %d: %v", i, err)
		}
	}
	other, err := r.Get(ctx, "other")
	if err != nil {
		t.Fatal(err)
	}
	if other.Requests != 1 || other.UpstreamCalls != 1 || other.TokensUsed != 42 || other.ByModel["gpt-4o-mini"].InputTokens != 42 {
		t.Errorf("the unrelated tenant's one call = %+v; want counted once", other)
	}
	rows, err := r.Days(ctx, []string{"other", "huge"}, now(), now())
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range rows {
		switch row.Tenant {
		case "other":
			if row.Requests != 1 || row.InputTokens != 42 {
				t.Errorf("other's day row = %+v; want its one call", row)
			}
		case "huge":
			if row.Requests != 2 || row.UpstreamCalls != 1 || row.InputTokens != MaxFigure {
				t.Errorf("huge's day row = %+v; want 2 requests, 1 call, input tokens at the bound %d", row, int64(MaxFigure))
			}
		}
	}
	huge, _ := r.Get(ctx, "huge")
	if huge.Requests != 2 || huge.UpstreamCalls != 1 || huge.TokensUsed != MaxFigure {
		t.Errorf("huge = %+v; want 2 requests, 1 call, tokens at the bound", huge)
	}
}

// TestRedisFlushRetriedAfterALostReplyCountsOnce: a flush whose reply
// never came (Redis applied it, the client gave up) is retried as it was
// and applied once; counts made meanwhile follow in the next batch.
func TestRedisFlushRetriedAfterALostReplyCountsOnce(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external Redis")
	}
	ctx := context.Background()
	r := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour})
	defer r.Close()
	r.Add("acme", Counters{Requests: 1})
	b := r.nextBatches()
	if len(b) != 1 {
		t.Fatalf("batches = %d; want 1", len(b))
	}
	lost := slices.Clone(b)
	if err := r.send(ctx, b); err != nil || b[0] != nil { // applied; pretend the reply was lost
		t.Fatal(err)
	}
	r.keepUnsent(lost)
	r.Add("acme", Counters{Requests: 1})
	for range 3 {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if got, _ := r.Get(ctx, "acme"); got.Requests != 2 {
		t.Errorf("requests = %d; want 2 (the retried batch once, the next once)", got.Requests)
	}
}
