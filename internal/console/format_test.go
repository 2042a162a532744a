package console

import (
	"math"
	"testing"
	"time"
)

func TestDollars(t *testing.T) {
	tests := []struct {
		give int64
		want string
	}{
		{0, "$0.00"},
		{1_234_560_000_000, "$1,234.56"},
		{1_234_565_000_000, "$1,234.57"},
		{10_000_000, "$0.01"},
		{1_500_000_000, "$1.50"},
		{123_000, "$0.000123"},
		{100_000, "$0.0001"},
		{5_000_000, "$0.005"},
		{9_999_999, "$0.01"},
		{400, "<$0.000001"},
		{-250_000_000, "-$0.25"},
		{1_000_000_000_000_000, "$1,000,000.00"},
	}
	for _, tt := range tests {
		if got := Dollars(tt.give); got != tt.want {
			t.Errorf("Dollars(%d) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

func TestCount(t *testing.T) {
	tests := []struct {
		give int64
		want string
	}{
		{0, "0"}, {999, "999"}, {1000, "1k"}, {1234, "1.2k"}, {12345, "12.3k"}, {123456, "123k"},
		{99_960, "100k"}, {999_499, "999k"}, {999_500, "1M"}, {1_200_000, "1.2M"}, {3_400_000_000, "3.4B"}, {-1500, "-1.5k"},
	}
	for _, tt := range tests {
		if got := Count(tt.give); got != tt.want {
			t.Errorf("Count(%d) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

func TestGroup(t *testing.T) {
	tests := []struct {
		give int64
		want string
	}{{0, "0"}, {999, "999"}, {1000, "1,000"}, {1234567, "1,234,567"}, {-1234, "-1,234"}}
	for _, tt := range tests {
		if got := Group(tt.give); got != tt.want {
			t.Errorf("Group(%d) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

func TestPercent(t *testing.T) {
	tests := []struct {
		part, whole int64
		want        string
	}{{934, 1000, "93.4 %"}, {1, 3, "33.3 %"}, {0, 5, "0.0 %"}, {5, 5, "100.0 %"}, {0, 0, "–"}}
	for _, tt := range tests {
		if got := Percent(tt.part, tt.whole); got != tt.want {
			t.Errorf("Percent(%d, %d) = %q; want %q", tt.part, tt.whole, got, tt.want)
		}
	}
}

func TestMillis(t *testing.T) {
	tests := []struct {
		give time.Duration
		want string
	}{{0, "–"}, {12 * time.Millisecond, "12 ms"}, {1500 * time.Microsecond, "2 ms"}, {1234 * time.Millisecond, "1.2 s"}}
	for _, tt := range tests {
		if got := Millis(tt.give); got != tt.want {
			t.Errorf("Millis(%v) = %q; want %q", tt.give, got, tt.want)
		}
	}
}

// TestFormatExtremes: the int64 extremes (a counter summed past its
// range) render without a crash; Count(MinInt64) recursed without end,
// a stack overflow that kills the process.
func TestFormatExtremes(t *testing.T) {
	for _, tt := range []struct {
		n                     int64
		count, group, dollars string
	}{
		{math.MinInt64, "-9223372T", "-9,223,372,036,854,775,808", "-$9,223,372,036.85"},
		{math.MaxInt64, "9223372T", "9,223,372,036,854,775,807", "$9,223,372,036.85"},
	} {
		if got := Count(tt.n); got != tt.count {
			t.Errorf("Count(%d) = %q; want %q", tt.n, got, tt.count)
		}
		if got := Group(tt.n); got != tt.group {
			t.Errorf("Group(%d) = %q; want %q", tt.n, got, tt.group)
		}
		if got := Dollars(tt.n); got != tt.dollars {
			t.Errorf("Dollars(%d) = %q; want %q", tt.n, got, tt.dollars)
		}
		_ = Percent(tt.n, tt.n)
		_ = Percent(1, tt.n)
	}
}
