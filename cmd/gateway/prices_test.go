package main

import (
	"testing"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/spend"
)

// TestShippedPricesValidate: deploy/prices.yaml loads, and its globs price
// the models they are written for, the specific before the broad.
func TestShippedPricesValidate(t *testing.T) {
	ps, err := config.LoadPrices("../../deploy/prices.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := spend.NewCatalog(ps)
	tests := []struct {
		give string
		want string // the glob that prices it
	}{
		{"gpt-4o-mini-2024-07-18", "gpt-4o-mini*"},
		{"gpt-4o-2024-08-06", "gpt-4o*"},
		{"gpt-5-nano-2025-08-07", "gpt-5-nano*"},
		{"gpt-4.1-mini", "gpt-4.1-mini*"},
		{"o3-mini", "o3-mini*"},
		{"claude-opus-4-5-20251101", "claude-opus-4-5*"},
		{"claude-opus-4-1-20250805", "claude-opus-4*"},
		{"claude-sonnet-4-5-20250929", "claude-sonnet-4*"},
		{"text-embedding-3-small", "text-embedding-3-small*"},
	}
	for _, tt := range tests {
		if p, ok := c.Lookup(tt.give); !ok || p.Model != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.give, p.Model, ok, tt.want)
		}
	}
}

// TestDemoPricesCoverTheMock: every model the mock lists is priced in the
// demo, so dollars show from the first try.
func TestDemoPricesCoverTheMock(t *testing.T) {
	c, err := loadPrices(config.Config{}, true)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range mockllm.DefaultModels {
		if _, ok := c.Lookup(m); !ok {
			t.Errorf("demo prices do not price the mock's %q", m)
		}
	}
	if c, err := loadPrices(config.Config{}, false); err != nil || c != nil {
		t.Errorf("without a file or the demo: %v, %v; want no catalog", c, err)
	}
}
