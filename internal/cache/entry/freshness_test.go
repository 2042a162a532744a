package entry

import (
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	stored := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &Entry{StoredAt: stored, TTL: time.Minute}
	ttl := stored.Add(time.Minute) // FreshUntil
	const ns = time.Nanosecond
	tests := []struct {
		name     string
		now      time.Time
		swr, sie time.Duration
		want     Freshness
	}{
		{"at store", stored, 10 * time.Second, time.Hour, Fresh},
		{"before store (clock skew)", stored.Add(-time.Second), 0, 0, Fresh},
		{"last instant of TTL", ttl.Add(-ns), 10 * time.Second, time.Hour, Fresh},
		{"at TTL, windows off", ttl, 0, 0, Expired},
		{"at TTL", ttl, 10 * time.Second, time.Hour, StaleRevalidate},
		{"last instant of revalidate", ttl.Add(10*time.Second - ns), 10 * time.Second, time.Hour, StaleRevalidate},
		{"end of revalidate", ttl.Add(10 * time.Second), 10 * time.Second, time.Hour, StaleIfError},
		{"last instant of if-error", ttl.Add(time.Hour - ns), 10 * time.Second, time.Hour, StaleIfError},
		{"end of if-error", ttl.Add(time.Hour), 10 * time.Second, time.Hour, Expired},
		{"revalidate only, at TTL", ttl, 10 * time.Second, 0, StaleRevalidate},
		{"revalidate only, end", ttl.Add(10 * time.Second), 10 * time.Second, 0, Expired},
		{"if-error only, at TTL", ttl, 0, time.Hour, StaleIfError},
		{"if-error only, end", ttl.Add(time.Hour), 0, time.Hour, Expired},
		{"if-error shorter than revalidate", ttl.Add(5 * time.Second), 10 * time.Second, 5 * time.Second, StaleRevalidate},
		{"if-error shorter, past revalidate", ttl.Add(10 * time.Second), 10 * time.Second, 5 * time.Second, Expired},
		{"negative windows are off", ttl, -time.Second, -time.Second, Expired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Classify(e, tt.now, tt.swr, tt.sie); got != tt.want {
				t.Errorf("Classify(now=TTL%+v, swr=%v, sie=%v) = %v, want %v", tt.now.Sub(ttl), tt.swr, tt.sie, got, tt.want)
			}
		})
	}
}

func TestStoreTTL(t *testing.T) {
	tests := []struct {
		ttl, swr, sie, want time.Duration
	}{
		{time.Hour, 0, 0, time.Hour},
		{time.Hour, 10 * time.Minute, 0, 70 * time.Minute},
		{time.Hour, 0, 24 * time.Hour, 25 * time.Hour},
		{time.Hour, 10 * time.Minute, 5 * time.Minute, 70 * time.Minute},
		{time.Hour, -time.Minute, -time.Minute, time.Hour},
	}
	for _, tt := range tests {
		if got := StoreTTL(tt.ttl, tt.swr, tt.sie); got != tt.want {
			t.Errorf("StoreTTL(%v, %v, %v) = %v, want %v", tt.ttl, tt.swr, tt.sie, got, tt.want)
		}
	}
}

func TestPastTTL(t *testing.T) {
	stored := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &Entry{StoredAt: stored, TTL: time.Minute}
	ttl := e.FreshUntil()
	tests := []struct {
		now  time.Time
		want int64
	}{
		{ttl, 1},
		{ttl.Add(999 * time.Millisecond), 1},
		{ttl.Add(time.Second), 1},
		{ttl.Add(2*time.Second - time.Nanosecond), 1},
		{ttl.Add(2 * time.Second), 2},
		{ttl.Add(90 * time.Second), 90},
	}
	for _, tt := range tests {
		if got := PastTTL(e, tt.now); got != tt.want {
			t.Errorf("PastTTL(TTL%+v) = %d, want %d", tt.now.Sub(ttl), got, tt.want)
		}
	}
}
