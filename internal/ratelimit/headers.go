package ratelimit

import (
	"net/http"
	"strconv"
	"time"
)

// SetHeaders writes OpenAI's rate-limit headers for one limit, so SDK users
// see familiar numbers. suffix is "requests" or "tokens" (Kind.Suffix):
//
//	x-ratelimit-limit-<suffix>      Burst: the most units usable at once
//	x-ratelimit-remaining-<suffix>  Remaining
//	x-ratelimit-reset-<suffix>      ResetAfter as a Go duration, see formatReset
//
// Nothing is written for an unlimited (zero) Limit.
func SetHeaders(h http.Header, suffix string, r Result) {
	if r.Limit.IsZero() {
		return
	}
	h.Set("x-ratelimit-limit-"+suffix, strconv.Itoa(r.Limit.Burst))
	h.Set("x-ratelimit-remaining-"+suffix, strconv.Itoa(r.Remaining))
	h.Set("x-ratelimit-reset-"+suffix, formatReset(r.ResetAfter))
}

// SetRetryAfter writes Retry-After (whole seconds, rounded up, at least 1,
// as RFC 9110 allows no fraction) and retry-after-ms (milliseconds, rounded
// up, at least 1), which the official OpenAI SDKs prefer. Rounding up means
// a client that waits exactly as told is not refused again.
func SetRetryAfter(h http.Header, d time.Duration) {
	h.Set("Retry-After", strconv.FormatInt(max(ceilDiv(d, time.Second), 1), 10))
	h.Set("retry-after-ms", strconv.FormatInt(max(ceilDiv(d, time.Millisecond), 1), 10))
}

// formatReset renders a reset duration the way OpenAI does ("1s", "6m0s",
// "20ms"), rounded up so a client never resets too early: below 1 s to the
// millisecond ("20ms"), below 1 min to 10 ms ("8.64s"), otherwise to the
// second ("6m0s"). Zero or negative is "0s".
func formatReset(d time.Duration) string {
	switch {
	case d <= 0:
		return "0s"
	case d < time.Second:
		return ceil(d, time.Millisecond).String()
	case d < time.Minute:
		return ceil(d, 10*time.Millisecond).String()
	}
	return ceil(d, time.Second).String()
}

func ceil(d, unit time.Duration) time.Duration { return time.Duration(ceilDiv(d, unit)) * unit }

func ceilDiv(d, unit time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d-1)/unit + 1)
}
