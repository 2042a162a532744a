package spend

// Usage is what an upstream answer used, as its API reports it, reduced to
// the four kinds of token that are priced apart.
type Usage struct {
	// Model is the model the upstream answered with
	// ("gpt-4o-mini-2024-07-18"), else the one requested.
	Model string
	// Input is every input token, the cached ones and cache writes
	// included (chat's prompt_tokens, Responses' input_tokens, Messages'
	// input_tokens + cache_read_input_tokens + cache_creation_input_tokens,
	// embeddings' prompt_tokens).
	Input int
	// CachedInput is the part of Input read from the provider's prompt
	// cache (prompt_tokens_details.cached_tokens,
	// input_tokens_details.cached_tokens, cache_read_input_tokens).
	CachedInput int
	// CacheWrite is the part of Input written to the provider's cache
	// (Anthropic's cache_creation_input_tokens).
	CacheWrite int
	// Output is every output token, reasoning included.
	Output int
}

// MaxTokens bounds each token count Cost prices (2³⁰, a thousand times any
// context window): with prices at most MaxPrice, four such products add up
// within an int64, so no cost ever wraps around.
const MaxTokens = 1 << 30

// Cost prices u in c: (Input − CachedInput − CacheWrite) × Input price +
// CachedInput × CachedInput price + CacheWrite × CacheWrite price +
// Output × Output price. priced is false when c has no price for u.Model;
// the cost is then 0 (the caller counts the call as unpriced). Counts are
// clamped to [0, MaxTokens], and cached and cache-write tokens to what
// Input holds, so a malformed usage object cannot make a cost negative.
func (c *Catalog) Cost(u Usage) (cost Nanodollars, priced bool) {
	p, ok := c.Lookup(u.Model)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// Cost prices u at p, whatever u.Model says (see Catalog.Cost).
func (p Price) Cost(u Usage) Nanodollars {
	in := clampTokens(u.Input)
	cached := min(clampTokens(u.CachedInput), in)
	write := min(clampTokens(u.CacheWrite), in-cached)
	out := clampTokens(u.Output)
	return Nanodollars(in-cached-write)*p.Input +
		Nanodollars(cached)*p.CachedInput +
		Nanodollars(write)*p.CacheWrite +
		Nanodollars(out)*p.Output
}

func clampTokens(n int) int { return min(max(n, 0), MaxTokens) }
