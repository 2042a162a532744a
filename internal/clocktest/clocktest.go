// Package clocktest is a manual clock for tests of TTLs, limits and
// backoffs: time moves only when the test says so.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a manual clock, safe for concurrent use.
type Clock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

// New returns a Clock showing start.
func New(start time.Time) *Clock { return &Clock{t: start} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
