package server

import (
	"sync"
	"time"
)

// hourOutcomes are the outcomes the last hour's ring counts, in the
// order the console draws them; "OTHER" is a request with no cache
// outcome (proxied, refused, or failed before one was known).
var hourOutcomes = [...]string{cacheHit, cacheMiss, cacheCoalesced, cacheStale, cacheNegative, cacheBypass, "OTHER"}

// MinuteOutcomes is one minute of this instance's authenticated requests,
// counted by cache outcome (hourOutcomes' order).
type MinuteOutcomes struct {
	Start  time.Time
	Counts [len(hourOutcomes)]int64
}

// hourRing counts this instance's requests by outcome in 60 one-minute
// buckets: bounded, whatever the traffic. It is per instance (no Redis
// call on the request path); the console says so.
type hourRing struct {
	mu      sync.Mutex // protects buckets
	buckets [60]MinuteOutcomes
}

// add counts one request of outcome at now.
func (h *hourRing) add(now time.Time, outcome string) {
	i := len(hourOutcomes) - 1
	for j, o := range hourOutcomes {
		if o == outcome {
			i = j
			break
		}
	}
	minute := now.Truncate(time.Minute)
	b := &h.buckets[minute.Unix()/60%60]
	h.mu.Lock()
	defer h.mu.Unlock()
	if !b.Start.Equal(minute) {
		*b = MinuteOutcomes{Start: minute}
	}
	b.Counts[i]++
}

// lastHour returns the 60 minutes ending with now's, oldest first; a
// minute with no request has zero counts.
func (h *hourRing) lastHour(now time.Time) []MinuteOutcomes {
	cur := now.Truncate(time.Minute)
	out := make([]MinuteOutcomes, 60)
	h.mu.Lock()
	defer h.mu.Unlock()
	for k := range 60 {
		minute := cur.Add(time.Duration(k-59) * time.Minute)
		b := h.buckets[minute.Unix()/60%60]
		if b.Start.Equal(minute) {
			out[k] = b
		} else {
			out[k] = MinuteOutcomes{Start: minute}
		}
	}
	return out
}
