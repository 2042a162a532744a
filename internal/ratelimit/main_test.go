package ratelimit

import (
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/clocktest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// fakeClock is a settable clock for the memory limiter, the Redis limiter's
// test hook and Fallback's backoff.
type fakeClock = clocktest.Clock

func newFakeClock() *fakeClock { return clocktest.New(time.Unix(1_750_000_000, 123_456_000)) }
