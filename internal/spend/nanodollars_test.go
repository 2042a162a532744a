package spend

import (
	"encoding/json"
	"math"
	"testing"
)

func TestNanodollarsString(t *testing.T) {
	tests := []struct {
		give      Nanodollars
		want, usd string
	}{
		{0, "$0.00", "0"},
		{123_000, "$0.000123", "0.000123"},
		{1, "$0.000000001", "0.000000001"},
		{Cent, "$0.01", "0.01"},
		{3*Dollar/2 + 0, "$1.50", "1.5"},
		{-Dollar / 4, "-$0.25", "-0.25"},
		{12 * Dollar, "$12.00", "12"},
		{math.MinInt64, "-$9223372036.854775808", "-9223372036.854775808"},
	}
	for _, tt := range tests {
		if got := tt.give.String(); got != tt.want {
			t.Errorf("Nanodollars(%d).String() = %q, want %q", int64(tt.give), got, tt.want)
		}
		if got := tt.give.USD(); got != tt.usd {
			t.Errorf("Nanodollars(%d).USD() = %q, want %q", int64(tt.give), got, tt.usd)
		}
	}
}

func TestParseUSD(t *testing.T) {
	tests := []struct {
		give string
		want Nanodollars
		ok   bool
	}{
		{"0.15", 150_000_000, true},
		{"18.75", 18_750_000_000, true},
		{".5", Dollar / 2, true},
		{"2.", 2 * Dollar, true},
		{"-1", -Dollar, true},
		{"0.000000001", 1, true},
		{"0.0000000001", 0, false},
		{"1e-3", 0, false},
		{"", 0, false},
		{".", 0, false},
		{"1.2.3", 0, false},
		{"9223372037", 0, false},
		{"abc", 0, false},
	}
	for _, tt := range tests {
		got, err := ParseUSD(tt.give)
		if (err == nil) != tt.ok || got != tt.want {
			t.Errorf("ParseUSD(%q) = %d, %v; want %d, ok=%v", tt.give, got, err, tt.want, tt.ok)
		}
	}
}

func TestNanodollarsJSON(t *testing.T) {
	b, err := json.Marshal(struct {
		Cost Nanodollars `json:"cost_usd"`
	}{123_000})
	if err != nil || string(b) != `{"cost_usd":0.000123}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back struct {
		Cost Nanodollars `json:"cost_usd"`
	}
	if err := json.Unmarshal(b, &back); err != nil || back.Cost != 123_000 {
		t.Fatalf("Unmarshal = %d, %v", back.Cost, err)
	}
}

func FuzzUSDRoundTrip(f *testing.F) {
	for _, n := range []int64{0, 1, -1, 123_000, 1_500_000_000, int64(Dollar), math.MaxInt64, math.MinInt64 + 1} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n == math.MinInt64 {
			return // its text is one past what ParseUSD accepts
		}
		s := Nanodollars(n).USD()
		if a := string(Nanodollars(n).AppendUSD(nil)); a != s {
			t.Fatalf("AppendUSD = %q, USD = %q", a, s)
		}
		back, err := ParseUSD(s)
		if err != nil || back != Nanodollars(n) {
			t.Fatalf("ParseUSD(%q) = %d, %v; want %d", s, back, err, n)
		}
	})
}
