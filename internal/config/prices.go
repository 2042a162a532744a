package config

import (
	"errors"
	"fmt"
	"os"
	"path"

	"github.com/corralhq/corral/internal/spend"
)

// PricesFile is the parsed prices file (CORRAL_PRICES_FILE).
type PricesFile struct {
	Prices []PriceSpec `yaml:"prices"`
}

// PriceSpec is one entry of the prices file: USD per million tokens.
type PriceSpec struct {
	// Model is a glob on the model name; the first matching entry wins.
	Model string `yaml:"model"`
	// InputPerMtok prices input tokens; required.
	InputPerMtok *PerMtok `yaml:"input_per_mtok"`
	// CachedInputPerMtok prices input read from the provider's prompt
	// cache; default InputPerMtok.
	CachedInputPerMtok *PerMtok `yaml:"cached_input_per_mtok"`
	// CacheWritePerMtok prices Anthropic's cache_creation_input_tokens;
	// default InputPerMtok.
	CacheWritePerMtok *PerMtok `yaml:"cache_write_per_mtok"`
	// OutputPerMtok prices output tokens, reasoning included; required (0
	// for embedding models).
	OutputPerMtok *PerMtok `yaml:"output_per_mtok"`
}

// PerMtok is a price in USD per million tokens as the file writes it
// ("0.15"). It is read from the file's text, never through a float, so
// 0.1 is exactly 100 nano-dollars a token; a malformed value is kept and
// reported by validation, which knows the field's line.
type PerMtok struct {
	text string
}

// UnmarshalText keeps the price's text for validation.
func (p *PerMtok) UnmarshalText(text []byte) error {
	p.text = string(text)
	return nil
}

// LoadPrices reads and validates the prices file at path.
func LoadPrices(path string) ([]spend.Price, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("prices file: %w", err)
	}
	return ParsePrices(path, data)
}

// ParsePrices parses and validates prices file content; name is used in
// error messages. Every mistake is reported with file, line and field.
func ParsePrices(name string, data []byte) ([]spend.Price, error) {
	const kind = "prices file"
	var f PricesFile
	if err := decodeFile(kind, name, "a prices: list (see the README's Costs and budgets)", data, &f); err != nil {
		return nil, err
	}
	v := validator{kind: kind, name: name, data: data}
	if len(f.Prices) == 0 {
		v.fail("prices", "prices", "at least one price is required")
	}
	out := make([]spend.Price, 0, len(f.Prices))
	for i, p := range f.Prices {
		at := fmt.Sprintf("prices[%d]", i)
		if p.Model == "" {
			v.fail(at, at+".model", "required: a model name or a glob such as gpt-4o-mini*")
		} else if _, err := path.Match(p.Model, ""); err != nil {
			v.fail(at+".model", at+".model", "bad glob %q: want a model name or a glob such as gpt-4o-mini*", clip(p.Model))
		}
		sp := spend.Price{Model: p.Model}
		sp.Input = v.perMtok(at, "input_per_mtok", p.InputPerMtok, true)
		sp.Output = v.perMtok(at, "output_per_mtok", p.OutputPerMtok, true)
		sp.CachedInput, sp.CacheWrite = sp.Input, sp.Input
		if p.CachedInputPerMtok != nil {
			sp.CachedInput = v.perMtok(at, "cached_input_per_mtok", p.CachedInputPerMtok, false)
		}
		if p.CacheWritePerMtok != nil {
			sp.CacheWrite = v.perMtok(at, "cache_write_per_mtok", p.CacheWritePerMtok, false)
		}
		out = append(out, sp)
	}
	if err := errors.Join(v.errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// perMtok turns a price per million tokens into nano-dollars per token:
// $1 per million tokens is 1,000 nano-dollars a token, so a price may have
// at most three decimals (0.075 is 75; 0.0375 cannot be priced per token in
// whole nano-dollars and is refused rather than rounded).
func (v *validator) perMtok(at, field string, p *PerMtok, required bool) spend.Nanodollars {
	fp := at + "." + field
	if p == nil {
		if required {
			v.fail(at, fp, "required (USD per million tokens, e.g. 0.15)")
		}
		return 0
	}
	usd, err := spend.ParseUSD(p.text)
	switch {
	case err != nil:
		v.fail(fp, fp, "want USD per million tokens such as 0.15, got %q", clip(p.text))
	case usd < 0:
		v.fail(fp, fp, "must be 0 or more")
	case usd%1_000_000 != 0:
		v.fail(fp, fp, "%s has more than 3 decimals: Corral prices whole nano-dollars per token ($0.001 per million tokens)", clip(p.text))
	case usd/1_000_000 > spend.MaxPrice:
		v.fail(fp, fp, "more than %s per million tokens", (spend.MaxPrice * 1_000_000).String())
	default:
		return usd / 1_000_000
	}
	return 0
}
