package cache

import (
	"time"

	"github.com/corralhq/corral/internal/clocktest"
)

// fakeClock is a manual clock shared by a store and its test.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock {
	return clocktest.New(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
}
