package coalesce

import (
	"strconv"
	"testing"
	"time"
)

// TestMemMarker: a name is marked until its backoff lapses on the
// injected clock, and the table never holds more than maxMarks names:
// when every one is live, no new mark is set until some lapse.
func TestMemMarker(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := newMemMarker(func() time.Time { return now })
	if !m.mark("a", 5*time.Second) {
		t.Fatal("first mark refused")
	}
	if m.mark("a", 5*time.Second) {
		t.Error("second mark within the backoff set")
	}
	now = now.Add(5*time.Second - time.Nanosecond)
	if m.mark("a", 5*time.Second) {
		t.Error("mark set a nanosecond before the backoff lapsed")
	}
	now = now.Add(time.Nanosecond)
	if !m.mark("a", 5*time.Second) {
		t.Error("mark refused once the backoff lapsed")
	}

	for i := range maxMarks - 1 {
		if !m.mark(strconv.Itoa(i), time.Minute) {
			t.Fatalf("mark %d refused below the bound", i)
		}
	}
	if m.mark("one too many", time.Minute) {
		t.Error("mark set with the table full of live markers")
	}
	if len(m.until) > maxMarks {
		t.Errorf("table holds %d names; bound %d", len(m.until), maxMarks)
	}
	now = now.Add(time.Minute)
	if !m.mark("one too many", time.Minute) {
		t.Error("mark refused after the live markers lapsed")
	}
	if len(m.until) != 1 {
		t.Errorf("table holds %d names after the sweep; want 1", len(m.until))
	}
}
