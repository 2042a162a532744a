package wire

import (
	"errors"
	"strconv"
)

// MaxTokens is the largest usage figure Corral believes (2³⁰ tokens, a
// thousand times any context window; it equals spend.MaxTokens, the bound
// a cost is computed within). An answer reporting more in any one figure
// is treated as one whose usage cannot be read, so no figure from an
// upstream larger than this reaches the usage counters, the metrics or
// the spend ledger; code that clamps counts of its own (the usage flush)
// can use the same bound.
const MaxTokens = 1 << 30

// ErrBadCount is a usage figure that is not a whole number of tokens from
// 0 to MaxTokens.
var ErrBadCount = errors.New("wire: usage figure is not an integer from 0 to MaxTokens")

// Count is one figure of an upstream answer's usage object, decoded only
// when it is a JSON integer from 0 to MaxTokens: a negative, fractional,
// exponent, string or larger value fails to decode with ErrBadCount, so
// the usage that holds it is unread (Usage.Known false) and its call is
// charged its estimate instead of a figure that cannot be true. null
// decodes as nothing, as encoding/json decodes it into an int.
//
// Every format reads its usage figures through Count and checks the whole
// with Usage.Checked: this is the one place Corral decides which figures
// from upstream it believes.
type Count int

// UnmarshalJSON implements json.Unmarshaler.
func (c *Count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	if len(b) == 0 || len(b) > len("1073741824") {
		return ErrBadCount
	}
	for _, d := range b {
		if d < '0' || d > '9' {
			return ErrBadCount
		}
	}
	n, err := strconv.Atoi(string(b))
	if err != nil || n > MaxTokens {
		return ErrBadCount
	}
	*c = Count(n)
	return nil
}

// Checked is u when its figures can be true together, else the unknown
// usage: every figure from 0 to MaxTokens, and the prompt's cached and
// cache-write parts within it. An unknown u is returned as it is.
func (u Usage) Checked() Usage {
	if !u.Known {
		return u
	}
	for _, n := range []int{u.Prompt, u.Completion, u.Cached, u.CacheWrite} {
		if n < 0 || n > MaxTokens {
			return Usage{}
		}
	}
	if u.Cached+u.CacheWrite > u.Prompt {
		return Usage{}
	}
	return u
}
