package lockout

import (
	"context"
	"sync"
	"time"
)

// MemoryOptions configures NewMemory. The zero value is ready to use.
type MemoryOptions struct {
	// Rule is when to lock out. Default DefaultRule.
	Rule Rule
	// Now is the clock. Default time.Now (differences use its monotonic
	// reading, so a wall-clock jump neither ends nor extends a lock).
	Now func() time.Time
	// MaxClients bounds the addresses held, each at most a few hundred
	// bytes. Default 50 000 (about 10 MB). Past it the entry least worth
	// keeping among a small sample is forgotten: an address not locked
	// out with the fewest wrong tokens, else the lock nearest its end.
	// Filling it takes that many addresses each guessing within a
	// minute; only entries that add nothing (expired) are swept.
	MaxClients int
}

// Memory is the Throttle of one instance: embedded mode's, and Fallback's
// own count while Redis does not answer. It starts no goroutine: expired
// entries are swept inline, at an amortised O(1) per attempt.
type Memory struct {
	rule Rule
	now  func() time.Time
	max  int

	mu      sync.Mutex         // protects clients and ops
	clients map[string]*record // client → its recent wrong tokens and lock
	ops     int                // attempts since the last sweep
}

// record is one client's state.
type record struct {
	fails []time.Time // wrong tokens within the window, oldest first, fewer than Rule.Failures
	until time.Time   // locked out until then; zero: not locked
}

var _ Throttle = (*Memory)(nil)

// evictSample is how many entries an eviction looks at.
const evictSample = 8

// NewMemory returns an empty Memory.
func NewMemory(o MemoryOptions) *Memory {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.MaxClients <= 0 {
		o.MaxClients = 50_000
	}
	return &Memory{rule: o.Rule.orDefault(), now: o.Now, max: o.MaxClients, clients: make(map[string]*record)}
}

// Attempt implements Throttle. It does no I/O and ignores ctx.
func (m *Memory) Attempt(_ context.Context, client string, wrong bool) Verdict {
	if d, ok := m.refused(client); ok {
		return Verdict{Refused: true, RetryAfter: d}
	}
	if !wrong {
		return Verdict{}
	}
	return Verdict{Locked: m.fail(client)}
}

// Len is the number of addresses held.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.clients)
}

// refused reports whether client is locked out, and for how much longer.
func (m *Memory) refused(client string) (time.Duration, bool) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.maybeSweepLocked(now)
	rec, ok := m.clients[client]
	if !ok || !now.Before(rec.until) {
		return 0, false
	}
	return rec.until.Sub(now), true
}

// fail counts a wrong token from client and reports whether it locked
// the address out.
func (m *Memory) fail(client string) bool {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recordLocked(client, now)
	rec.fails = m.liveLocked(rec.fails, now)
	if len(rec.fails)+1 < m.rule.Failures {
		rec.fails = append(rec.fails, now)
		return false
	}
	rec.fails, rec.until = rec.fails[:0], now.Add(m.rule.Lock)
	return true
}

// lock locks client out for d: what Redis said, so the next attempts
// here are refused without a round trip.
func (m *Memory) lock(client string, d time.Duration) {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	rec := m.recordLocked(client, now)
	if until := now.Add(d); until.After(rec.until) {
		rec.until = until
	}
}

// recordLocked is client's record, made (evicting one when full) if it
// has none.
func (m *Memory) recordLocked(client string, now time.Time) *record {
	if rec, ok := m.clients[client]; ok {
		return rec
	}
	if len(m.clients) >= m.max {
		m.sweepLocked(now)
	}
	if len(m.clients) >= m.max {
		m.evictLocked(now)
	}
	rec := &record{}
	m.clients[client] = rec
	return rec
}

// liveLocked is fails without those that have left the window.
func (m *Memory) liveLocked(fails []time.Time, now time.Time) []time.Time {
	i := 0
	for i < len(fails) && now.Sub(fails[i]) >= m.rule.Window {
		i++
	}
	return fails[i:]
}

// maybeSweepLocked sweeps once enough attempts have passed: after
// max(1024, entries) of them, so a sweep costs O(1) per attempt.
func (m *Memory) maybeSweepLocked(now time.Time) {
	m.ops++
	if m.ops < max(1024, len(m.clients)) {
		return
	}
	m.sweepLocked(now)
}

// sweepLocked drops the entries that hold nothing any more: no lock in
// force and no wrong token within the window.
func (m *Memory) sweepLocked(now time.Time) {
	m.ops = 0
	for k, rec := range m.clients {
		rec.fails = m.liveLocked(rec.fails, now)
		if len(rec.fails) == 0 && !now.Before(rec.until) {
			delete(m.clients, k)
		}
	}
}

// evictLocked forgets one entry of a sample (map order is random): one
// not locked out with the fewest wrong tokens, else the lock that ends
// soonest.
func (m *Memory) evictLocked(now time.Time) {
	var victim string
	var best *record
	n := 0
	for k, rec := range m.clients {
		if best == nil || less(rec, best, now) {
			victim, best = k, rec
		}
		if n++; n == evictSample {
			break
		}
	}
	delete(m.clients, victim)
}

// less reports whether a is less worth keeping than b.
func less(a, b *record, now time.Time) bool {
	al, bl := now.Before(a.until), now.Before(b.until)
	switch {
	case al != bl:
		return !al
	case al:
		return a.until.Before(b.until)
	}
	return len(a.fails) < len(b.fails)
}
