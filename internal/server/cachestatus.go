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

// X-Corral-Cache's values as header value slices, built once: a header
// map takes them as they are (net/http never changes a value slice in
// place; Set and Add replace or copy it), so an answer allocates none.
var (
	hitValue       = []string{cacheHit}
	missValue      = []string{cacheMiss}
	coalescedValue = []string{cacheCoalesced}
	bypassValue    = []string{cacheBypass}
	negativeValue  = []string{cacheNegative}
	staleValue     = []string{cacheStale}
)

// setCacheValue sets X-Corral-Cache to status.
func setCacheValue(h http.Header, status string) {
	var v []string
	switch status {
	case cacheHit:
		v = hitValue
	case cacheMiss:
		v = missValue
	case cacheCoalesced:
		v = coalescedValue
	case cacheBypass:
		v = bypassValue
	case cacheNegative:
		v = negativeValue
	case cacheStale:
		v = staleValue
	default:
		v = []string{status}
	}
	h["X-Corral-Cache"] = v
}

// sourceName is the X-Corral-Cache value of a flight layer source.
func sourceName(src coalesce.Source) string { return src.String() }

// setCacheHeaders writes X-Corral-Cache, Cache-Status (RFC 9211) and, for
// answers from a stored entry, Age.
func setCacheHeaders(h http.Header, status string, e *entry.Entry, stored bool, ctl controls, now time.Time) {
	setCacheValue(h, status)
	var cs string
	switch status {
	case cacheHit, cacheNegative:
		var b [40]byte
		cs = string(strconv.AppendInt(append(b[:0], "corral; hit; ttl="...), int64(e.Remaining(now)/time.Second), 10))
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
	if e != nil && (status == cacheHit || status == cacheNegative || status == cacheStale) {
		// One backing array for both values.
		v := []string{cs, strconv.FormatInt(int64(e.Age(now)/time.Second), 10)}
		h["Cache-Status"], h["Age"] = v[0:1:1], v[1:2:2]
		return
	}
	h["Cache-Status"] = []string{cs}
}
