// Package entry is the stored answer every cache store holds and the
// request path serves: a leaf (standard library only), so the flight layer
// (internal/coalesce) and the wire formats use it without importing a
// store or Redis. internal/cache aliases it as cache.Entry.
package entry

import (
	"errors"
	"net/http"
	"time"
)

// Entry is one stored upstream answer. See the package doc for the
// immutability contract: an Entry must not be modified after Set, nor the
// Entry that Get returns.
type Entry struct {
	// Status is the HTTP status: 200 for responses, the upstream's 4xx for
	// negative entries.
	Status int
	// Header holds only the headers worth replaying; build it with
	// [KeepHeaders].
	Header http.Header
	// Body is the complete, non-streaming JSON body.
	Body []byte
	// StoredAt is when the entry was stored (for Age and max-age). Set fills
	// it with the store's clock when it is zero.
	StoredAt time.Time
	// TTL is the TTL the entry was stored with (for Cache-Status ttl=).
	// Set fills it with its ttl argument when it is zero.
	TTL time.Duration
	// PromptTokens and CompletionTokens are the upstream's usage, so a hit
	// can be charged against tokens/min without parsing the body again.
	PromptTokens     int
	CompletionTokens int
	// CachedTokens and CacheWriteTokens are the parts of PromptTokens the
	// provider read from and wrote to its prompt cache, and Model the model
	// that answered, so a hit's saving is priced at today's prices without
	// parsing the body (internal/spend).
	CachedTokens     int
	CacheWriteTokens int
	Model            string
	// UsageUnread marks the answer of an upstream call whose usage Corral
	// could not read (none came, or none it believes): the call is charged
	// its estimate. It lives only with the call that made the answer and
	// is never stored; a stored entry's usage is what it says.
	UsageUnread bool
}

// ErrNotCacheable means a store's Set refused the entry (nil, empty body,
// ttl <= 0, or larger than a Memory store's MaxBytes); nothing was stored.
var ErrNotCacheable = errors.New("cache: not cacheable")

// Age is how long ago the entry was stored, never negative (clocks of two
// gateway instances may disagree by a little).
func (e *Entry) Age(now time.Time) time.Duration {
	return max(now.Sub(e.StoredAt), 0)
}

// Remaining is how much of the entry's TTL is left at now, never negative.
func (e *Entry) Remaining(now time.Time) time.Duration {
	return max(e.StoredAt.Add(e.TTL).Sub(now), 0)
}

// replayHeaders is the allow-list KeepHeaders applies. Everything else is
// left out on purpose:
//   - Authorization, Set-Cookie: credentials, never stored.
//   - x-ratelimit-*, Retry-After: describe Corral's upstream account at the
//     time of the call; Corral sets its own per-tenant values.
//   - openai-organization, openai-project: name Corral's upstream account.
//   - x-request-id, openai-processing-ms, Date: belong to one call, and
//     Corral sets its own X-Request-Id.
//   - Content-Length, Content-Encoding, Transfer-Encoding: framing, which
//     the server recomputes for the decoded Body.
var replayHeaders = []string{
	"Content-Type",
	"Openai-Model",
	"Openai-Version",
	// X-Corral-Upstream names the upstream that produced the answer: a
	// COALESCED answer carries the leader's; a HIT drops it (the server
	// serves a stored answer without naming an upstream).
	"X-Corral-Upstream",
	// X-Corral-Provider names who runs that upstream, kept and dropped
	// with it.
	"X-Corral-Provider",
}

// KeepHeaders returns a copy of the headers of h worth replaying on a hit
// (Content-Type, openai-model, openai-version), or nil when h has none of
// them. The result does not share value slices with h.
func KeepHeaders(h http.Header) http.Header {
	var out http.Header
	for _, name := range replayHeaders {
		vs := h.Values(name) // canonicalizes name; finds canonical keys only
		if len(vs) == 0 {
			continue
		}
		if out == nil {
			out = make(http.Header, len(replayHeaders))
		}
		out[name] = append([]string(nil), vs...)
	}
	return out
}
