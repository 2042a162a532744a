// Package testdeps decides what a test does when a program it runs is not
// installed (redis-server and redis-cli for the Redis tests, chromium for
// the console's browser tests).
//
// Under `make test` (which sets CORRAL_TEST_STRICT=1 after tools/testdeps.sh
// has installed them) and under CI=true the test fails, so a green run has
// run every test. Under a bare `go test` it is skipped, so a machine
// without them can still test the rest.
package testdeps

import (
	"os"
	"testing"
)

// Strict reports whether a missing program fails the test rather than
// skipping it: CORRAL_TEST_STRICT=1 (set by `make test`) or CI=true.
func Strict() bool {
	return os.Getenv("CORRAL_TEST_STRICT") == "1" || os.Getenv("CI") == "true"
}

// Missing ends tb because the program name is not installed: it fails when
// Strict and skips otherwise, adding hint to the skip message.
func Missing(tb testing.TB, name, hint string) {
	tb.Helper()
	if Strict() {
		tb.Fatalf("%s not found on PATH; tools/testdeps.sh installs it (make test runs it)", name)
		return
	}
	tb.Skipf("%s not installed%s; make test installs it", name, hint)
}
