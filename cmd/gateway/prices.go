package main

import (
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/spend"
)

// demoPrices prices the mock model's names in -demo, so dollars show from
// the first curl. They are list prices of the models the mock is named
// after (see deploy/prices.yaml); the mock-* names cost what gpt-4o-mini
// costs.
const demoPrices = `prices:
  - model: "gpt-4o-mini*"
    input_per_mtok: 0.15
    cached_input_per_mtok: 0.075
    output_per_mtok: 0.60
  - model: "gpt-4o*"
    input_per_mtok: 2.50
    cached_input_per_mtok: 1.25
    output_per_mtok: 10.00
  - model: "gpt-3.5-turbo-instruct*"
    input_per_mtok: 1.50
    output_per_mtok: 2.00
  - model: "text-embedding-3-small*"
    input_per_mtok: 0.02
    output_per_mtok: 0
  - model: "claude-*"
    input_per_mtok: 3
    cached_input_per_mtok: 0.30
    cache_write_per_mtok: 3.75
    output_per_mtok: 15
  - model: "mock-*"
    input_per_mtok: 0.15
    output_per_mtok: 0.60
`

// loadPrices reads the prices file (CORRAL_PRICES_FILE); without one, the
// demo gets demoPrices and everything else no catalog (nothing priced).
func loadPrices(cfg config.Config, demo bool) (*spend.Catalog, error) {
	var (
		ps  []spend.Price
		err error
	)
	switch {
	case cfg.PricesFile != "":
		ps, err = config.LoadPrices(cfg.PricesFile)
	case demo:
		ps, err = config.ParsePrices("demo prices", []byte(demoPrices))
	default:
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return spend.NewCatalog(ps), nil
}
