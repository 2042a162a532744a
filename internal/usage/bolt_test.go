package usage

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBoltKeepsUsageAcrossAReopen: the totals and the per-day rows written
// to usage.db are there after a reopen, and a day past retention is
// deleted from the file.
func TestBoltKeepsUsageAcrossAReopen(t *testing.T) {
	dir := t.TempDir()
	day := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	now := day
	clock := func() time.Time { return now }
	ctx := context.Background()
	b, err := OpenBolt(dir, BoltOptions{Interval: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	c := Counters{Requests: 2, UpstreamCalls: 1, TokensUsed: 30, CostNanos: 900,
		ByModel: map[string]ModelCounters{"gpt-4o-mini*": {Requests: 2, UpstreamCalls: 1, InputTokens: 10, OutputTokens: 20, CostNanos: 900}}}
	b.Add("acme", c)
	if err := b.Close(); err != nil { // Close writes
		t.Fatal(err)
	}
	b, err = OpenBolt(dir, BoltOptions{Interval: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := b.Get(ctx, "acme"); !cmp.Equal(got, c) {
		t.Errorf("totals after the reopen = %+v; want %+v", got, c)
	}
	rows, _ := b.Days(ctx, []string{"acme"}, day, day)
	want := []DayRow{{Tenant: "acme", Day: "2026-12-01", Model: "gpt-4o-mini*", ModelCounters: c.ByModel["gpt-4o-mini*"]}}
	if !cmp.Equal(rows, want) {
		t.Errorf("rows after the reopen = %+v; want %+v", rows, want)
	}
	now = day.AddDate(0, 0, RetentionDays)
	b.Add("acme", Counters{Requests: 1})
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = OpenBolt(dir, BoltOptions{Interval: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if len(b.Memory.days) != 0 {
		t.Errorf("days in the file past retention: %v; want none", b.Memory.days)
	}
}
