package server

import (
	"testing"
	"time"
)

// TestHourRing: requests land in their minute by outcome, a minute is
// forgotten an hour later, and the ring's answer always spans 60 minutes
// ending with the current one.
func TestHourRing(t *testing.T) {
	var h hourRing
	t0 := time.Date(2026, 12, 2, 10, 0, 30, 0, time.UTC)
	h.add(t0, cacheHit)
	h.add(t0, cacheHit)
	h.add(t0.Add(time.Minute), cacheMiss)
	h.add(t0.Add(time.Minute), "")
	got := h.lastHour(t0.Add(time.Minute))
	if len(got) != 60 || !got[59].Start.Equal(t0.Add(time.Minute).Truncate(time.Minute)) {
		t.Fatalf("last hour = %d minutes ending %v", len(got), got[len(got)-1].Start)
	}
	if got[58].Counts[0] != 2 || got[59].Counts[1] != 1 || got[59].Counts[len(hourOutcomes)-1] != 1 {
		t.Errorf("counts = %v, %v; want 2 hits, then 1 miss and 1 other", got[58].Counts, got[59].Counts)
	}
	// An hour on, the same bucket serves a new minute: the old counts go.
	later := t0.Add(60 * time.Minute)
	h.add(later, cacheCoalesced)
	got = h.lastHour(later)
	if got[59].Counts != [len(hourOutcomes)]int64{0, 0, 1, 0, 0, 0, 0} {
		t.Errorf("an hour later the minute holds %v; want only the new request", got[59].Counts)
	}
	if got[0].Counts[1] != 1 {
		t.Errorf("the oldest minute = %v; want the miss of 59 minutes ago", got[0].Counts)
	}
}
