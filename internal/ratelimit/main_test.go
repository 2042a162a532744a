package ratelimit

import (
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable clock for the memory limiter, the Redis limiter's
// test hook and Fallback's backoff.
type fakeClock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

func newFakeClock() *fakeClock { return &fakeClock{t: time.Unix(1_750_000_000, 123_456_000)} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}
