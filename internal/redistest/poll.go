package redistest

import (
	"context"
	"testing"
	"time"
)

// settleTimeout bounds how long a Cluster or Sentinel set may take to
// reach a state the test waits for (formed, healed, failed over).
const settleTimeout = 30 * time.Second

// pollUntil calls check every 20 ms, each call under a 500 ms deadline,
// until it reports done, and fails the test with check's last reason once
// the deadline passes. Redis nodes and Sentinels announce none of the
// states a test waits for, so polling is the only way to see them.
func pollUntil(tb testing.TB, deadline time.Time, check func(ctx context.Context) (done bool, why string)) {
	tb.Helper()
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		done, why := check(ctx)
		cancel()
		if done {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("redistest: %s", why)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// multiAddrURL is addrs in go-redis's cluster URL form (the first address
// as the host, the rest as addr= parameters), the form CORRAL_REDIS_URL
// takes for a Cluster and for a Sentinel set.
func multiAddrURL(addrs []string) string {
	u := "redis://" + addrs[0]
	for i, a := range addrs[1:] {
		sep := "&"
		if i == 0 {
			sep = "?"
		}
		u += sep + "addr=" + a
	}
	return u
}
