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
		// Azure OpenAI answers with OpenAI's names, and spells GPT-3.5 its own way.
		{"gpt-4o-2024-11-20", "gpt-4o*"},
		{"gpt-35-turbo-0125", "gpt-35-turbo*"},
		{"gpt-35-turbo-instruct-0914", "gpt-35-turbo-instruct*"},
		// Bedrock: model ids, geographic and global inference profiles.
		{"anthropic.claude-sonnet-4-5-20250929-v1:0", "*anthropic.claude-sonnet-4-5*"},
		{"us.anthropic.claude-sonnet-4-5-20250929-v1:0", "*anthropic.claude-sonnet-4-5*"},
		{"eu.anthropic.claude-sonnet-4-5-20250929-v1:0", "*anthropic.claude-sonnet-4-5*"},
		{"apac.anthropic.claude-sonnet-4-5-20250929-v1:0", "*anthropic.claude-sonnet-4-5*"},
		{"global.anthropic.claude-sonnet-4-5-20250929-v1:0", "global.anthropic.claude-sonnet-4-5*"},
		{"us.anthropic.claude-sonnet-4-20250514-v1:0", "*anthropic.claude-sonnet-4*"},
		{"global.anthropic.claude-opus-4-5-20251101-v1:0", "global.anthropic.claude-opus-4-5*"},
		{"us.anthropic.claude-opus-4-1-20250805-v1:0", "*anthropic.claude-opus-4*"},
		{"anthropic.claude-3-7-sonnet-20250219-v1:0", "*anthropic.claude-3-7-sonnet*"},
		{"global.anthropic.claude-haiku-4-5-20251001-v1:0", "global.anthropic.claude-haiku-4-5*"},
		{"eu.anthropic.claude-haiku-4-5-20251001-v1:0", "*anthropic.claude-haiku-4-5*"},
		{"us.anthropic.claude-3-5-haiku-20241022-v1:0", "*anthropic.claude-3-5-haiku*"},
		{"anthropic.claude-3-haiku-20240307-v1:0", "*anthropic.claude-3-haiku*"},
		// Vertex AI: its ids are priced by the Anthropic entries.
		{"claude-sonnet-4-5@20250929", "claude-sonnet-4*"},
		{"claude-opus-4-5@20251101", "claude-opus-4-5*"},
		{"claude-opus-4-1@20250805", "claude-opus-4*"},
		{"claude-haiku-4-5@20251001", "claude-haiku-4-5*"},
		{"claude-3-5-haiku@20241022", "claude-3-5-haiku*"},
		{"claude-3-7-sonnet@20250219", "claude-3-7-sonnet*"},
	}
	for _, tt := range tests {
		if p, ok := c.Lookup(tt.give); !ok || p.Model != tt.want {
			t.Errorf("Lookup(%q) = %q, %v; want %q", tt.give, p.Model, ok, tt.want)
		}
	}
	// A Bedrock profile is priced as Anthropic prices the model (global),
	// or 10 % more (a geographic profile of a 4.5 model).
	direct, _ := c.Lookup("claude-sonnet-4-5-20250929")
	global, _ := c.Lookup("global.anthropic.claude-sonnet-4-5-20250929-v1:0")
	geo, _ := c.Lookup("us.anthropic.claude-sonnet-4-5-20250929-v1:0")
	if global.Input != direct.Input || global.Output != direct.Output || geo.Input != direct.Input*11/10 || geo.Output != direct.Output*11/10 {
		t.Errorf("sonnet 4.5 input/output: direct %v/%v, global %v/%v, us. %v/%v; want global = direct, us. = direct + 10 %%",
			direct.Input, direct.Output, global.Input, global.Output, geo.Input, geo.Output)
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
