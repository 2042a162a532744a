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
//
// The console's browser tests share one chromium for the binary; it is
// closed before the leak check.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(closingBrowser{m}, goleak.IgnoreAnyFunction("github.com/redis/go-redis/v9/internal/pool.(*ConnPool).tryDial"))
}

// closingBrowser runs the tests, then closes the shared browser.
type closingBrowser struct{ m *testing.M }

func (c closingBrowser) Run() int {
	defer closeBrowser()
	return c.m.Run()
}
