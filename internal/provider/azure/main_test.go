package azure

import (
	"testing"

	"go.uber.org/goleak"
)

// No test leaves a goroutine behind: token refreshes and calls end with
// their callers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
