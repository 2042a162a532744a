package ratelimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestFormatReset(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{
		{give: 0, want: "0s"},
		{give: -time.Second, want: "0s"},
		{give: 1, want: "1ms"},
		{give: 20 * time.Millisecond, want: "20ms"},
		{give: 19*time.Millisecond + 1, want: "20ms"},
		{give: 999*time.Millisecond + 1, want: "1s"},
		{give: time.Second, want: "1s"},
		{give: 2 * time.Second, want: "2s"},
		{give: 8_631 * time.Millisecond, want: "8.64s"},
		{give: 59_999 * time.Millisecond, want: "1m0s"},
		{give: time.Minute, want: "1m0s"},
		{give: time.Minute + 1, want: "1m1s"},
		{give: 6 * time.Minute, want: "6m0s"},
		{give: 5*time.Minute + 59*time.Second + 1, want: "6m0s"},
		{give: 2*time.Hour + 30*time.Second, want: "2h0m30s"},
	}
	for _, tt := range tests {
		if got := formatReset(tt.give); got != tt.want {
			t.Errorf("formatReset(%v) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestSetHeaders(t *testing.T) {
	tests := []struct {
		name   string
		suffix string
		give   Result
		want   http.Header
	}{
		{
			name:   "requests",
			suffix: Requests.Suffix(),
			give:   Result{Limit: PerMinute(30), Remaining: 0, RetryAfter: 2 * time.Second, ResetAfter: time.Minute},
			want: http.Header{
				"X-Ratelimit-Limit-Requests":     {"30"},
				"X-Ratelimit-Remaining-Requests": {"0"},
				"X-Ratelimit-Reset-Requests":     {"1m0s"},
			},
		},
		{
			name:   "tokens",
			suffix: Tokens.Suffix(),
			give:   Result{Limit: PerMinute(200_000), Allowed: true, Remaining: 149_000, ResetAfter: 15_300 * time.Millisecond},
			want: http.Header{
				"X-Ratelimit-Limit-Tokens":     {"200000"},
				"X-Ratelimit-Remaining-Tokens": {"149000"},
				"X-Ratelimit-Reset-Tokens":     {"15.3s"},
			},
		},
		{
			name:   "limit is the burst",
			suffix: "requests",
			give:   Result{Limit: Limit{Rate: 60, Burst: 10, Period: time.Minute}, Allowed: true, Remaining: 9, ResetAfter: time.Second},
			want: http.Header{
				"X-Ratelimit-Limit-Requests":     {"10"},
				"X-Ratelimit-Remaining-Requests": {"9"},
				"X-Ratelimit-Reset-Requests":     {"1s"},
			},
		},
		{
			name:   "unlimited writes nothing",
			suffix: "tokens",
			give:   Result{Allowed: true},
			want:   http.Header{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.Header{}
			SetHeaders(h, tt.suffix, tt.give)
			if diff := cmp.Diff(tt.want, h); diff != "" {
				t.Errorf("headers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetRetryAfter(t *testing.T) {
	tests := []struct {
		give      time.Duration
		wantSecs  string
		wantMilli string
	}{
		{give: 0, wantSecs: "1", wantMilli: "1"},
		{give: -time.Second, wantSecs: "1", wantMilli: "1"},
		{give: 1, wantSecs: "1", wantMilli: "1"},
		{give: 20 * time.Millisecond, wantSecs: "1", wantMilli: "20"},
		{give: 20*time.Millisecond + 1, wantSecs: "1", wantMilli: "21"},
		{give: time.Second, wantSecs: "1", wantMilli: "1000"},
		{give: time.Second + time.Millisecond, wantSecs: "2", wantMilli: "1001"},
		{give: 2 * time.Second, wantSecs: "2", wantMilli: "2000"},
		{give: 122 * time.Second, wantSecs: "122", wantMilli: "122000"},
	}
	for _, tt := range tests {
		h := http.Header{}
		SetRetryAfter(h, tt.give)
		if got := h.Get("Retry-After"); got != tt.wantSecs {
			t.Errorf("SetRetryAfter(%v): Retry-After = %q, want %q", tt.give, got, tt.wantSecs)
		}
		if got := h.Get("retry-after-ms"); got != tt.wantMilli {
			t.Errorf("SetRetryAfter(%v): retry-after-ms = %q, want %q", tt.give, got, tt.wantMilli)
		}
	}
}
