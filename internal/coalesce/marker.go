package coalesce

import (
	"sync"
	"time"
)

// maxMarks bounds the in-process refresh markers. When every slot holds a
// live marker, no new refresh starts until one lapses: the stale entries
// keep serving, and the upstream is spared.
const maxMarks = 4096

// memMarker is the refresh backoff of one instance: a name is marked
// until its deadline on the injected clock.
type memMarker struct {
	now   func() time.Time
	mu    sync.Mutex
	until map[string]time.Time
}

func newMemMarker(now func() time.Time) *memMarker {
	return &memMarker{now: now, until: make(map[string]time.Time)}
}

// mark sets name for ttl unless it is set; false means it was (or the
// table is full of live markers).
func (m *memMarker) mark(name string, ttl time.Duration) bool {
	now := m.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if t, ok := m.until[name]; ok && now.Before(t) {
		return false
	}
	if len(m.until) >= maxMarks {
		for k, t := range m.until {
			if !now.Before(t) {
				delete(m.until, k)
			}
		}
		if len(m.until) >= maxMarks {
			return false
		}
	}
	m.until[name] = now.Add(ttl)
	return true
}
