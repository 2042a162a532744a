package server

import (
	"net/http"
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any goroutine outlives the tests: flights,
// lease renewals, bus subscriptions and stream followers all have owners
// that must stop them.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(int) {
		http.DefaultClient.CloseIdleConnections()
	}))
}
