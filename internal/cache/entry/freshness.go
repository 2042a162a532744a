package entry

import "time"

// Freshness is what a stored entry is good for at a given moment; see
// Classify.
type Freshness uint8

const (
	// Fresh: within its TTL; served as a hit.
	Fresh Freshness = iota
	// StaleRevalidate: past its TTL but within stale_while_revalidate;
	// served at once while one background call refreshes it.
	StaleRevalidate
	// StaleIfError: past stale_while_revalidate but within stale_if_error;
	// served only when the upstream call fails transiently.
	StaleIfError
	// Expired: never served.
	Expired
)

func (f Freshness) String() string {
	switch f {
	case Fresh:
		return "fresh"
	case StaleRevalidate:
		return "stale-revalidate"
	case StaleIfError:
		return "stale-if-error"
	}
	return "expired"
}

// FreshUntil is the first moment the entry is no longer fresh: StoredAt
// plus TTL.
func (e *Entry) FreshUntil() time.Time { return e.StoredAt.Add(e.TTL) }

// StoreTTL is how long a store keeps an entry whose TTL is ttl: the TTL
// plus the larger stale window, so that a stale entry is still there to
// serve. Negative windows count as 0.
func StoreTTL(ttl, whileRevalidate, ifError time.Duration) time.Duration {
	return ttl + max(whileRevalidate, ifError, 0)
}

// Classify says what e is good for at now, given the tenant's stale
// windows (0 = off). The windows are independent and both start at
// FreshUntil, as in RFC 5861:
//
//	StoredAt          FreshUntil         +whileRevalidate      +ifError
//	   |---- Fresh ------|-- StaleRevalidate --|-- StaleIfError --|-- Expired
//
// A window ends exclusively: at FreshUntil exactly the entry is stale, at
// FreshUntil+whileRevalidate exactly it is past that window. An ifError
// window no longer than whileRevalidate adds nothing. Classify is pure: it
// reads no clock.
func Classify(e *Entry, now time.Time, whileRevalidate, ifError time.Duration) Freshness {
	past := now.Sub(e.FreshUntil())
	switch {
	case past < 0:
		return Fresh
	case past < whileRevalidate:
		return StaleRevalidate
	case past < ifError:
		return StaleIfError
	}
	return Expired
}

// PastTTL is the whole seconds now is past e's TTL, at least 1 (for
// Cache-Status ttl=-N on a stale answer): a stale entry is stale from its
// first second on.
func PastTTL(e *Entry, now time.Time) int64 {
	return max(int64(now.Sub(e.FreshUntil())/time.Second), 1)
}
