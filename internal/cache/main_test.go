package cache

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the run if a test leaves a goroutine behind. Every Memory a
// test opens is closed (which stops otter's clean-up goroutine), and every
// Redis client is closed, so no goroutine is ignored.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
