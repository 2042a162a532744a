package openai

import "math"

// DefaultMaxTokens is the completion size EstimateTokens assumes when a
// request sets no max_tokens (or max_completion_tokens). It is deliberately
// modest: the estimate only admits the request, and the server charges the
// real usage afterwards (ChargeN), so an under-estimate is paid back as debt
// while an over-estimate such as the model's 16k output ceiling would refuse
// small tenants needlessly.
const DefaultMaxTokens = 256

// EstimateTokens is the tokens/min cost of a request before it runs: its
// body at about 4 bytes per token, rounded up, plus n completions of
// maxTokens each. maxTokens ≤ 0 means DefaultMaxTokens and n ≤ 0 means 1.
// The sum saturates instead of overflowing, since both numbers come from
// the client.
func EstimateTokens(bodyBytes, maxTokens, n int) int {
	if maxTokens <= 0 {
		maxTokens = DefaultMaxTokens
	}
	n = max(n, 1)
	prompt := 0
	if bodyBytes > 0 {
		prompt = (bodyBytes-1)/4 + 1
	}
	if maxTokens > (math.MaxInt-prompt)/n {
		return math.MaxInt
	}
	return prompt + n*maxTokens
}
