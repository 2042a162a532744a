package cache

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestEntryAgeRemaining(t *testing.T) {
	stored := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	e := &Entry{StoredAt: stored, TTL: time.Hour}
	tests := []struct {
		name          string
		give          time.Time
		wantAge       time.Duration
		wantRemaining time.Duration
	}{
		{"at store", stored, 0, time.Hour},
		{"midway", stored.Add(90 * time.Second), 90 * time.Second, time.Hour - 90*time.Second},
		{"after expiry", stored.Add(2 * time.Hour), 2 * time.Hour, 0},
		{"clock behind", stored.Add(-time.Second), 0, time.Hour + time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := e.Age(tt.give); got != tt.wantAge {
				t.Errorf("Age = %v, want %v", got, tt.wantAge)
			}
			if got := e.Remaining(tt.give); got != tt.wantRemaining {
				t.Errorf("Remaining = %v, want %v", got, tt.wantRemaining)
			}
		})
	}
}

func TestKeepHeaders(t *testing.T) {
	tests := []struct {
		name string
		give http.Header
		want http.Header
	}{
		{"nil", nil, nil},
		{"none kept", http.Header{"Authorization": {"Bearer sk-x"}}, nil},
		{
			name: "allow-list only",
			give: http.Header{
				"Content-Type":                   {"application/json"},
				"Openai-Model":                   {"gpt-4o-mini-2024-07-18"},
				"Openai-Version":                 {"2020-10-01"},
				"Openai-Organization":            {"corral-upstream-org"},
				"Openai-Processing-Ms":           {"412"},
				"X-Request-Id":                   {"req_123"},
				"Set-Cookie":                     {"__cf_bm=x"},
				"Authorization":                  {"Bearer sk-x"},
				"X-Ratelimit-Remaining-Requests": {"9"},
				"Retry-After":                    {"1"},
				"Content-Length":                 {"42"},
				"Content-Encoding":               {"gzip"},
			},
			want: http.Header{
				"Content-Type":   {"application/json"},
				"Openai-Model":   {"gpt-4o-mini-2024-07-18"},
				"Openai-Version": {"2020-10-01"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, KeepHeaders(tt.give)); diff != "" {
				t.Errorf("KeepHeaders (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKeepHeadersCopies(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}}
	got := KeepHeaders(h)
	h["Content-Type"][0] = "text/plain"
	if got.Get("Content-Type") != "application/json" {
		t.Errorf("KeepHeaders shares value slices with its input")
	}
}
