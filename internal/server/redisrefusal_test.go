package server

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestRedisThatRefusesWrites: a Redis at maxmemory with noeviction (OOM)
// or turned into a read-only replica (READONLY) refuses every lock and
// store. That is a Redis fault like an unreachable one: requests are
// answered through in-process coalescing at once, never after waiting out
// a lock or wait timeout (here 30 s, far above the 10 s bound).
func TestRedisThatRefusesWrites(t *testing.T) {
	for _, refusal := range []string{"oom", "readonly"} {
		t.Run(refusal, func(t *testing.T) {
			h, rs := distributed(t, 2, func(o *harnessOptions) {
				o.server = func(so *Options) { so.WaitTimeout = 30 * time.Second }
			})
			ctx := context.Background()
			rdb := rs.Client()
			// Warm both instances' connections while Redis still writes.
			for i, base := range h.bases() {
				if a := send(ctx, base, acmeKey, chatBody(fmt.Sprintf("warm %d", i))); a.status != 200 {
					t.Fatalf("warm-up: %d %s", a.status, a.body)
				}
			}
			switch refusal {
			case "oom":
				if err := rdb.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err(); err != nil {
					t.Fatal(err)
				}
				if err := rdb.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
					t.Fatal(err)
				}
			case "readonly":
				// A replica of a master that does not exist: reads work,
				// every write is refused with READONLY.
				if err := rdb.Do(ctx, "REPLICAOF", "127.0.0.1", "1").Err(); err != nil {
					t.Fatal(err)
				}
			}
			if err := rdb.Set(ctx, "probe", "x", 0).Err(); err == nil {
				t.Fatalf("%s: Redis still accepts writes", refusal)
			}
			for i := range 6 {
				rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				a := send(rctx, h.bases()[i%2], acmeKey, chatBody(fmt.Sprintf("%s refused %d", refusal, i)))
				cancel()
				if a.err != nil || a.status != 200 {
					t.Fatalf("%s: request %d: %v %d %s", refusal, i, a.err, a.status, a.body)
				}
			}
		})
	}
}
