package openai

import (
	"math"
	"testing"
)

func TestEstimateTokens(t *testing.T) {
	tests := []struct {
		promptBytes, maxTokens, n int
		want                      int
	}{
		{0, 0, 0, DefaultMaxTokens},
		{4, 100, 1, 1 + 100},
		{5, 100, 1, 2 + 100},
		{4000, 100, 3, 1000 + 300},
		{4000, 0, 1, 1000 + DefaultMaxTokens},
		{4000, -5, -1, 1000 + DefaultMaxTokens},
		{-10, 10, 1, 10},
		{8 << 20, math.MaxInt / 2, 3, math.MaxInt},
	}
	for _, tt := range tests {
		if got := EstimateTokens(tt.promptBytes, tt.maxTokens, tt.n); got != tt.want {
			t.Errorf("EstimateTokens(%d, %d, %d) = %d, want %d", tt.promptBytes, tt.maxTokens, tt.n, got, tt.want)
		}
	}
}
