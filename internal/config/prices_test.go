package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/spend"
)

func TestParsePrices(t *testing.T) {
	const file = `prices:
  - model: "gpt-4o-mini*"
    input_per_mtok: 0.15
    cached_input_per_mtok: 0.075
    output_per_mtok: 0.60
  - model: claude-sonnet-4*
    input_per_mtok: 3
    cached_input_per_mtok: "0.30"
    cache_write_per_mtok: 3.75
    output_per_mtok: 15
  - model: text-embedding-3-small
    input_per_mtok: 0.02
    output_per_mtok: 0
`
	got, err := ParsePrices("p.yaml", []byte(file))
	if err != nil {
		t.Fatal(err)
	}
	want := []spend.Price{
		{Model: "gpt-4o-mini*", Input: 150, CachedInput: 75, CacheWrite: 150, Output: 600},
		{Model: "claude-sonnet-4*", Input: 3000, CachedInput: 300, CacheWrite: 3750, Output: 15000},
		{Model: "text-embedding-3-small", Input: 20, CachedInput: 20, CacheWrite: 20, Output: 0},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("prices (-want +got):\n%s", diff)
	}
}

func TestParsePricesErrors(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"empty list", "prices: []\n", "prices file p.yaml:1: prices: at least one price is required"},
		{"no model", "prices:\n  - input_per_mtok: 1\n    output_per_mtok: 1\n", "p.yaml:2: prices[0].model: required"},
		{"bad glob", "prices:\n  - model: \"gpt-[\"\n    input_per_mtok: 1\n    output_per_mtok: 1\n", "p.yaml:2: prices[0].model: bad glob \"gpt-[\""},
		{"no input", "prices:\n  - model: m\n    output_per_mtok: 1\n", "p.yaml:2: prices[0].input_per_mtok: required"},
		{"no output", "prices:\n  - model: m\n    input_per_mtok: 1\n", "p.yaml:2: prices[0].output_per_mtok: required"},
		{"not a number", "prices:\n  - model: m\n    input_per_mtok: cheap\n    output_per_mtok: 1\n", "p.yaml:3: prices[0].input_per_mtok: want USD per million tokens such as 0.15, got \"cheap\""},
		{"negative", "prices:\n  - model: m\n    input_per_mtok: 1\n    output_per_mtok: -1\n", "p.yaml:4: prices[0].output_per_mtok: must be 0 or more"},
		{"too fine", "prices:\n  - model: m\n    input_per_mtok: 0.0375\n    output_per_mtok: 1\n", "p.yaml:3: prices[0].input_per_mtok: 0.0375 has more than 3 decimals"},
		{"exponent", "prices:\n  - model: m\n    input_per_mtok: 1e-3\n    output_per_mtok: 1\n", "p.yaml:3: prices[0].input_per_mtok: want USD per million tokens"},
		{"too dear", "prices:\n  - model: m\n    input_per_mtok: 2000000\n    output_per_mtok: 1\n", "p.yaml:3: prices[0].input_per_mtok: more than $1000000.00 per million tokens"},
		{"cached bad", "prices:\n  - model: m\n    input_per_mtok: 1\n    cached_input_per_mtok: x\n    output_per_mtok: 1\n", "p.yaml:4: prices[0].cached_input_per_mtok: want USD"},
		{"unknown field", "prices:\n  - model: m\n    input_per_mtok: 1\n    output_per_mtok: 1\n    outptu: 2\n", "p.yaml:5"},
		{"not a list", "prices: 3\n", "prices file p.yaml:1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParsePrices("p.yaml", []byte(tt.give))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}
