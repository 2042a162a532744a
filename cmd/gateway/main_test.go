package main

import (
	"testing"

	"go.uber.org/goleak"
)

// go-redis probes a node it failed to dial from a goroutine of its pool
// that sleeps a second between tries and returns once the pool is closed:
// after a test that stops its Redis nodes, one may still be asleep when
// the binary ends. It is the library's, and bounded; every goroutine of
// Corral's own is still checked.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}
