package spend

import (
	"path"
	"sync"
	"sync/atomic"
)

// Price is what one model costs, in nano-dollars per token: a list price of
// $0.15 per million tokens is 150.
type Price struct {
	// Model is the glob the price was declared for ("gpt-4o-mini*"). It is
	// also the model label of the cost metrics, so clients cannot grow
	// their series: only the catalog names them.
	Model string
	// Input prices input tokens the provider did not read from its cache.
	Input Nanodollars
	// CachedInput prices input tokens read from the provider's prompt
	// cache (OpenAI's cached_tokens, Anthropic's cache_read_input_tokens).
	CachedInput Nanodollars
	// CacheWrite prices Anthropic's cache_creation_input_tokens.
	CacheWrite Nanodollars
	// Output prices output tokens, reasoning tokens included.
	Output Nanodollars
}

// MaxPrice is the largest price per token a catalog accepts ($1,000,000 per
// million tokens), so that a cost of up to MaxTokens tokens of each kind
// fits an int64.
const MaxPrice = Dollar // a dollar a token

// Catalog is an immutable list of prices; the first entry whose glob
// matches a model prices it. Lookups are memoised per model name, so the
// hit path pays a map read, not a walk over the globs.
type Catalog struct {
	prices []Price
	// memo maps a model name to the index of its price, -1 for none. It
	// holds at most memoMax names (counted by memoN): client-chosen names
	// beyond that are matched each time rather than grow memory.
	memo  sync.Map
	memoN atomic.Int64
}

const memoMax = 4096

// NewCatalog returns a catalog of prices, in order. The caller validated
// them (internal/config does, with file, line and field named).
func NewCatalog(prices []Price) *Catalog {
	return &Catalog{prices: append([]Price(nil), prices...)}
}

// Len is the number of prices.
func (c *Catalog) Len() int {
	if c == nil {
		return 0
	}
	return len(c.prices)
}

// Prices returns a copy of the catalog's prices, in order.
func (c *Catalog) Prices() []Price {
	if c == nil {
		return nil
	}
	return append([]Price(nil), c.prices...)
}

// Lookup returns the price of model: the first entry whose glob matches.
// A nil catalog prices nothing.
func (c *Catalog) Lookup(model string) (Price, bool) {
	if c == nil || model == "" {
		return Price{}, false
	}
	if v, ok := c.memo.Load(model); ok {
		return c.at(v.(int))
	}
	i := -1
	for j, p := range c.prices {
		if ok, _ := path.Match(p.Model, model); ok {
			i = j
			break
		}
	}
	if c.memoN.Load() < memoMax {
		if _, loaded := c.memo.LoadOrStore(model, i); !loaded {
			c.memoN.Add(1)
		}
	}
	return c.at(i)
}

func (c *Catalog) at(i int) (Price, bool) {
	if i < 0 {
		return Price{}, false
	}
	return c.prices[i], true
}

// Label is the metrics label for model: its price's glob, or "other" for a
// model the catalog does not price.
func (c *Catalog) Label(model string) string {
	if p, ok := c.Lookup(model); ok {
		return p.Model
	}
	return OtherModel
}

// OtherModel is the model label of everything the catalog does not price.
const OtherModel = "other"

// Live holds the catalog in force; a reload swaps in a new one whole, and
// readers never lock.
type Live struct{ p atomic.Pointer[Catalog] }

// NewLive returns a Live holding c (nil: nothing priced).
func NewLive(c *Catalog) *Live {
	l := &Live{}
	l.p.Store(c)
	return l
}

// Load returns the catalog in force; nil when there is none. A nil *Live
// holds none.
func (l *Live) Load() *Catalog {
	if l == nil {
		return nil
	}
	return l.p.Load()
}

// Swap puts c in force.
func (l *Live) Swap(c *Catalog) { l.p.Store(c) }
