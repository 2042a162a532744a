package server

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// controls are the per-request cache controls of the public contract.
type controls struct {
	noStore bool          // Cache-Control: no-store → BYPASS
	noCache bool          // Cache-Control: no-cache → skip the read, still coalesce and store
	maxAge  time.Duration // Cache-Control: max-age=N → accept entries aged ≤ N; -1 = no limit
	ttl     time.Duration // X-Corral-Cache-TTL: TTL for the entry this request stores; 0 = tenant default
}

// parseControls reads Cache-Control and X-Corral-Cache-TTL. Unknown
// directives are ignored, as HTTP caches do; a malformed TTL is a 400 so a
// client never believes a TTL was applied when it was not.
//
// A request that accepts text/event-stream and says "no-cache" is not
// asking for a fresh answer: SSE clients send that on every stream by
// convention (browsers' EventSource, sashabaranov/go-openai), to keep
// proxies from buffering the stream. Honouring it would mean no streaming
// SDK ever hits the cache. Such a client forces a fresh answer with
// max-age=0 (or skips the cache with no-store).
func parseControls(h http.Header) (controls, *apiError) {
	c := controls{maxAge: -1}
	sse := strings.Contains(header(h, "Accept"), "text/event-stream")
	for _, v := range h["Cache-Control"] {
		for d := range strings.SplitSeq(v, ",") {
			name, arg, _ := strings.Cut(strings.TrimSpace(d), "=")
			switch strings.ToLower(strings.TrimSpace(name)) {
			case "no-store":
				c.noStore = true
			case "no-cache":
				c.noCache = !sse
			case "max-age":
				n, err := strconv.ParseInt(strings.Trim(strings.TrimSpace(arg), `"`), 10, 64)
				if err == nil && n >= 0 {
					age := time.Duration(min(n, int64(100*365*24*3600))) * time.Second
					if c.maxAge < 0 || age < c.maxAge {
						c.maxAge = age
					}
				}
			}
		}
	}
	if v := header(h, "X-Corral-Cache-Ttl"); v != "" {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil || n <= 0 || n > 365*24*3600 {
			return c, errInvalidRequest("X-Corral-Cache-TTL must be a whole number of seconds between 1 and 31536000.", "X-Corral-Cache-TTL")
		}
		c.ttl = time.Duration(n) * time.Second
	}
	return c, nil
}

// minStoredAt is the oldest entry this request accepts at now.
func (c controls) minStoredAt(now time.Time) time.Time {
	switch {
	case c.noCache:
		return now.Add(-clockSkew)
	case c.maxAge >= 0:
		return now.Add(-c.maxAge)
	}
	return time.Time{}
}

// clockSkew is how far apart two instances' clocks may be when a
// no-cache request accepts an entry another instance just stored for it.
const clockSkew = time.Second
