package server

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
)

// TestStaleRefreshHeedsTheBudget: a stale-while-revalidate refresh is an
// upstream call like any other. With a day budget of four calls
// ($0.00096) and three prompts primed ($0.00072 spent), the first stale
// read's refresh runs and is charged (the budget is then spent), and the
// next stale reads are answered STALE with no refresh: the upstream sees
// four calls and the spend never passes the budget, on one instance and
// across two sharing Redis (read on the one that did not spend).
func TestStaleRefreshHeedsTheBudget(t *testing.T) {
	for _, mode := range []struct {
		name string
		dist bool
		gen  string // an API tenant's generation: its budget is kept under its Scope
	}{{"embedded", false, ""}, {"distributed", true, ""}, {"embedded api tenant", false, "0a1b2c3d4e5f"}} {
		t.Run(mode.name, func(t *testing.T) {
			var calls atomic.Int64
			clock := newTestClock()
			opts := []func(*harnessOptions){withPrices, withCapped(4*240_000, &calls), func(o *harnessOptions) {
				o.tenants[len(o.tenants)-1].Generation = mode.gen
				p := &o.tenants[len(o.tenants)-1].Policy
				p.StaleWhileRevalidate = 10 * time.Minute
				rsrv, prev := o.redis, o.server
				o.server = func(so *Options) {
					if prev != nil {
						prev(so)
					}
					so.Now = clock.Now
					if rsrv != nil {
						so.Cache = cache.NewRedis(testRedisClient(t, rsrv), cache.RedisOptions{Now: clock.Now})
						return
					}
					mem := cache.NewMemory(cache.MemoryOptions{Now: clock.Now})
					t.Cleanup(func() { _ = mem.Close() })
					so.Cache = mem
				}
			}}
			var h *harness
			if mode.dist {
				h, _ = distributed(t, 2, opts...)
			} else {
				h = newHarness(t, opts...)
			}
			ctx := context.Background()
			bases := h.bases()
			prompt := func(i int) string { return cappedChat("stale prompt " + strconv.Itoa(i)) }
			for i := range 3 {
				if a := send(ctx, bases[0], cappedKey, prompt(i)); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
					t.Fatalf("prime %d: %d %s %s", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
				}
			}
			clock.Advance(time.Hour + 30*time.Second)
			reader := bases[len(bases)-1]
			for i := range 3 {
				a := send(ctx, reader, cappedKey, prompt(i))
				if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale {
					t.Fatalf("stale read %d: %d %s %s", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
				}
				waitFlights(t, h)
			}
			if n := calls.Load(); n != 4 {
				t.Errorf("upstream calls = %d; want 4 (three misses, one refresh within the budget)", n)
			}
			if n := refreshes(h, "capped"); n > 2 || (!mode.dist && n != 1) {
				t.Errorf("refreshes started = %v; want at most 2 (one ran, the others were skipped or refused), on one instance 1 (this instance saw the budget spent)", n)
			}
			st, err := h.srvs[0].budgets.Read(ctx, tenant.ScopeOf("capped", mode.gen), spend.Limits{Day: 4 * 240_000})
			if err != nil {
				t.Fatal(err)
			}
			if st[0].Spent != 4*240_000 || st[0].Reserved != 0 {
				t.Errorf("spent %s reserved %s; want the four calls' $0.00096 and nothing reserved", st[0].Spent, st[0].Reserved)
			}
			// The refreshed prompt is fresh again; the others still serve stale.
			if a := send(ctx, reader, cappedKey, prompt(0)); a.header.Get("X-Corral-Cache") != cacheHit {
				t.Errorf("the refreshed prompt: %s; want HIT", a.header.Get("X-Corral-Cache"))
			}
			if a := send(ctx, reader, cappedKey, prompt(1)); a.status != 200 || a.header.Get("X-Corral-Cache") != cacheStale {
				t.Errorf("an unrefreshed prompt: %d %s; want STALE", a.status, a.header.Get("X-Corral-Cache"))
			}
			waitFlights(t, h)
			if n := calls.Load(); n != 4 {
				t.Errorf("upstream calls at the end = %d; want 4", n)
			}
		})
	}
}
