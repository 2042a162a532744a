package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
)

// Values of X-Corral-Cache.
const (
	cacheHit       = "HIT"       // served from the positive cache
	cacheMiss      = "MISS"      // this request led the upstream call
	cacheCoalesced = "COALESCED" // waited for another request's call
	cacheBypass    = "BYPASS"    // no-store or a tenant without cache
	cacheNegative  = "NEGATIVE"  // a remembered deterministic failure
	cacheStale     = "STALE"     // a stored answer past its TTL, within a stale window
)

// sourceName is the X-Corral-Cache value of a flight layer source.
func sourceName(src coalesce.Source) string { return src.String() }

// setCacheHeaders writes X-Corral-Cache, Cache-Status (RFC 9211) and, for
// answers from a stored entry, Age.
func setCacheHeaders(h http.Header, status string, e *entry.Entry, stored bool, ctl controls, now time.Time) {
	h.Set("X-Corral-Cache", status)
	var cs string
	switch status {
	case cacheHit, cacheNegative:
		cs = "corral; hit; ttl=" + strconv.FormatInt(int64(e.Remaining(now)/time.Second), 10)
	case cacheStale:
		cs = "corral; hit; fwd=stale; ttl=-" + strconv.FormatInt(entry.PastTTL(e, now), 10)
	case cacheBypass:
		cs = "corral; fwd=bypass"
	case cacheCoalesced:
		cs = "corral; fwd=miss; collapsed"
		if ctl.noCache {
			cs = "corral; fwd=request; collapsed"
		}
	default:
		cs = "corral; fwd=miss"
		if ctl.noCache {
			cs = "corral; fwd=request"
		}
		if stored {
			cs += "; stored"
		}
	}
	h.Set("Cache-Status", cs)
	if e != nil && (status == cacheHit || status == cacheNegative || status == cacheStale) {
		h.Set("Age", strconv.FormatInt(int64(e.Age(now)/time.Second), 10))
	}
}
