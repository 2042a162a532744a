package server

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
)

// TestMirrorLoadOlderThanOwnChangeIsDropped: a Mirror load whose List
// began before a change this instance made (it read an older revision)
// must not take that change back. Seen as a key made through the admin
// API answering 401 on the instance that made it, for the milliseconds
// until the change's own notification brought the next load.
func TestMirrorLoadOlderThanOwnChangeIsDropped(t *testing.T) {
	file, err := tenant.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	s.sources.file = file
	s.sources.parse = func([]byte) (tenant.Policy, error) { return tenant.Policy{MaxLeaders: 1}, nil }
	const key = "sk-corral-mirror-order-test"
	before := tenantstore.Tenant{ID: "acme", Version: 1, Policy: []byte(`{}`)}
	after := before
	after.Version = 2
	after.Keys = []tenantstore.Key{{ID: "key_1", SHA256: tenant.HashKey(key)}}

	s.SetAPITenants(loadAt(5, []tenantstore.Tenant{before})) // the tenant's creation, loaded
	s.setAPITenant("acme", &after, revAt(6))                 // this instance makes a key
	s.SetAPITenants(loadAt(5, []tenantstore.Tenant{before})) // a load that listed before the key
	if _, ok := s.tenants.Load().Authenticate(key); !ok {
		t.Fatal("the key made at revision 6 was taken back by a load of revision 5")
	}
	s.setAPITenant("acme", &before, revAt(5)) // an older change of the same tenant, applied late
	if _, ok := s.tenants.Load().Authenticate(key); !ok {
		t.Fatal("an older change of the tenant replaced a newer one")
	}
	s.SetAPITenants(loadAt(7, nil)) // a newer load: the tenant is gone everywhere
	if _, ok := s.tenants.Load().Authenticate(key); ok {
		t.Fatal("a newer load was dropped")
	}
}

// TestMirrorLoadOfALostHistoryReplaces: once the store lost its data, its
// revisions count again from below what this instance holds. A load of
// the new epoch, or a Rewound one (a failover to a replica behind),
// replaces what this instance holds, and the changes made afterwards, its
// own included, take effect at once; they are not dropped as older.
func TestMirrorLoadOfALostHistoryReplaces(t *testing.T) {
	s, live := mirrorTestServer(t, nil)
	withKey := storedWithKey
	s.SetAPITenants(loadAt(7, []tenantstore.Tenant{withKey("lost", 7, "sk-corral-lost")}))

	// A FLUSHALL: the new epoch's first load holds one change.
	e2 := func(n int64) tenantstore.Revision { return tenantstore.Revision{Epoch: "e2", N: n} }
	s.SetAPITenants(tenantstore.Load{Rev: e2(2), Tenants: []tenantstore.Tenant{withKey("fresh", 2, "sk-corral-fresh")}})
	if live("sk-corral-lost") || !live("sk-corral-fresh") {
		t.Fatalf("after a load of a new epoch: lost key live %v, new key live %v; want false, true", live("sk-corral-lost"), live("sk-corral-fresh"))
	}
	revoked := withKey("fresh", 3, "")
	s.setAPITenant("fresh", &revoked, e2(3)) // this instance revokes the key
	if live("sk-corral-fresh") {
		t.Fatal("a key revoked here after the loss still authenticates")
	}
	s.SetAPITenants(tenantstore.Load{Rev: e2(2), Tenants: []tenantstore.Tenant{withKey("fresh", 2, "sk-corral-fresh")}})
	if live("sk-corral-fresh") {
		t.Fatal("a load of the new epoch older than this instance's revoke took it back")
	}

	// A failover to a replica one change behind: the revoke is lost too.
	s.SetAPITenants(tenantstore.Load{Rev: e2(1), Rewound: true, Tenants: []tenantstore.Tenant{withKey("other", 1, "")}})
	if _, ok := s.tenants.Load().Get("fresh"); ok {
		t.Fatal("a Rewound load was dropped as older")
	}
	made := withKey("other", 2, "sk-corral-other")
	s.setAPITenant("other", &made, e2(2)) // a key made here after the failover
	if !live("sk-corral-other") {
		t.Fatal("a key made here after a failover does not authenticate")
	}
}

// TestMirrorLoadReusesUnchangedTenants: a load parses only the records
// whose version it has not seen (every instance loads the whole store on
// each change, and parsing 10,000 policies each time cost seconds), and a
// load that changes nothing keeps the running registry; a new version, a
// tenant made again under the same id, and a removed tenant all take
// effect.
func TestMirrorLoadReusesUnchangedTenants(t *testing.T) {
	file, err := tenant.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed := 0
	s := &Server{log: slog.New(slog.DiscardHandler)}
	s.sources.file = file
	s.sources.parse = func(doc []byte) (tenant.Policy, error) {
		parsed++
		if string(doc) == `{"requests_per_minute":7}` {
			return tenant.Policy{MaxLeaders: 1, RequestsPerMinute: 7}, nil
		}
		return tenant.Policy{MaxLeaders: 1}, nil
	}
	created := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ts := make([]tenantstore.Tenant, 100)
	for i := range ts {
		ts[i] = tenantstore.Tenant{ID: fmt.Sprintf("t%03d", i), Version: 1, Policy: []byte(`{}`), CreatedAt: created, UpdatedAt: created}
	}
	s.SetAPITenants(loadAt(1, ts))
	if parsed != 100 {
		t.Fatalf("first load parsed %d policies; want 100", parsed)
	}
	reg := s.tenants.Load()
	s.SetAPITenants(loadAt(2, slices.Clone(ts)))
	if parsed != 100 || s.tenants.Load() != reg {
		t.Fatalf("an unchanged load parsed %d policies (want 100) or swapped the registry", parsed)
	}
	next := slices.Clone(ts)
	next[3].Version, next[3].UpdatedAt, next[3].Policy = 2, created.Add(time.Minute), []byte(`{"requests_per_minute":7}`)
	next[4].CreatedAt, next[4].UpdatedAt, next[4].Policy = created.Add(time.Hour), created.Add(time.Hour), []byte(`{"requests_per_minute":7}`) // deleted and made again
	next = slices.Delete(next, 5, 6)
	s.SetAPITenants(loadAt(3, next))
	if parsed != 102 {
		t.Errorf("a load with two new versions parsed %d policies in all; want 102", parsed)
	}
	for _, id := range []string{"t003", "t004"} {
		if got, ok := s.tenants.Load().Get(id); !ok || got.Policy.RequestsPerMinute != 7 {
			t.Errorf("%s after its new version: %+v, %v", id, got, ok)
		}
	}
	if _, ok := s.tenants.Load().Get("t005"); ok {
		t.Error("a removed tenant is still served")
	}
	if got, _ := s.tenants.Load().Get("t006"); got == nil || got.Policy.RequestsPerMinute != 0 {
		t.Errorf("an unchanged tenant: %+v", got)
	}
}

// TestConcurrentOwnChangesAllLand: changes applied here at once, from
// many goroutines, share rebuilds, and every one of them is live when its
// call returns.
func TestConcurrentOwnChangesAllLand(t *testing.T) {
	s := benchSources(t, 1000)
	var wg sync.WaitGroup
	for i := range 64 {
		wg.Go(func() {
			id := fmt.Sprintf("new%02d", i)
			key := "sk-corral-" + id
			rec := tenantstore.Tenant{ID: id, Version: 1, Policy: []byte(`{}`), Keys: []tenantstore.Key{{ID: "key_" + id, SHA256: tenant.HashKey(key)}}}
			s.setAPITenant(id, &rec, revAt(int64(2000+i)))
			if got, ok := s.tenants.Load().Authenticate(key); !ok || got.ID != id {
				t.Errorf("%s: its key is not live when setAPITenant returns", id)
			}
		})
	}
	wg.Wait()
	if n := s.tenants.Load().Len(); n != 1064 {
		t.Errorf("%d tenants; want 1064", n)
	}
}

// benchSources is a server's tenant sources holding n API tenants.
func benchSources(tb testing.TB, n int) *Server {
	file, err := tenant.NewRegistry(nil)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	s.sources.file = file
	s.sources.parse = func([]byte) (tenant.Policy, error) { return tenant.Policy{MaxLeaders: 1, RequestsPerMinute: 600}, nil }
	ts := make([]tenantstore.Tenant, n)
	for i := range ts {
		id := fmt.Sprintf("t%05d", i)
		ts[i] = tenantstore.Tenant{ID: id, Version: 1, Policy: []byte(`{"requests_per_minute":600}`), Keys: []tenantstore.Key{{ID: "key_" + id, SHA256: tenant.HashKey("sk-" + id)}}}
	}
	s.SetAPITenants(loadAt(1, ts))
	return s
}

// BenchmarkCreateAPITenantsAt10k measures this instance's part of one
// tenant creation through the admin API (the store's write aside) on a
// gateway holding 10,000 API tenants, with 16 changes in flight at once
// as corralbench's tenant-hit scenario makes them.
func BenchmarkCreateAPITenantsAt10k(b *testing.B) {
	s := benchSources(b, 10_000)
	var n atomic.Int64
	b.SetParallelism(8) // 16 goroutines on 2 cores
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			id := fmt.Sprintf("new%07d", i)
			rec := tenantstore.Tenant{ID: id, Version: 1, Policy: []byte(`{}`)}
			s.setAPITenant(id, &rec, revAt(1+i))
		}
	})
}

// storeEpoch is the epoch of the store these tests' loads come from.
const storeEpoch = "e1"

// revAt is revision n of storeEpoch.
func revAt(n int64) tenantstore.Revision { return tenantstore.Revision{Epoch: storeEpoch, N: n} }

// loadAt is a Mirror's load of ts at revision n of storeEpoch.
func loadAt(n int64, ts []tenantstore.Tenant) tenantstore.Load {
	return tenantstore.Load{Rev: revAt(n), Tenants: ts}
}

// revisionStore is a tenant store that answers only Revision, with what
// the test sets: the store as a failover left it.
type revisionStore struct {
	tenantstore.Store
	mu  sync.Mutex
	rev tenantstore.Revision
}

func (r *revisionStore) Revision(context.Context) (tenantstore.Revision, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rev, nil
}

// TestMirrorLoadAfterOwnChangesWereLost: this instance's own changes
// raised its revision (6..8) before a failover to a replica that never got
// them (the store is at 5 again, same epoch). Its Mirror's next load (5)
// is not Rewound as the Mirror sees it (its last load was older still),
// and it must not be dropped as older than the lost changes: every later
// change elsewhere (6, 7: a delete and a revoke) would be dropped too,
// and a deleted tenant would answer on this instance until the store's
// revision passed 8. A load older than what this instance holds is taken
// once the store itself is behind it: the store lost those changes.
func TestMirrorLoadAfterOwnChangesWereLost(t *testing.T) {
	store := &revisionStore{}
	s, live := mirrorTestServer(t, store)
	withKey := storedWithKey
	s.SetAPITenants(loadAt(5, []tenantstore.Tenant{withKey("doomed", 5, "sk-corral-doomed")}))
	made := withKey("mine", 8, "sk-corral-mine")
	s.setAPITenant("mine", &made, revAt(8)) // this instance's change, lost in the failover

	// A load that listed before this instance's change, with the store
	// still holding it: dropped, as ever.
	store.rev = revAt(8)
	s.SetAPITenants(loadAt(5, []tenantstore.Tenant{withKey("doomed", 5, "sk-corral-doomed")}))
	if !live("sk-corral-mine") {
		t.Fatal("a load older than this instance's change, the store holding it, took the change back")
	}

	// The failover: the store is back at 5, then another instance deletes
	// "doomed" (6).
	store.rev = revAt(6)
	s.SetAPITenants(loadAt(6, nil))
	if live("sk-corral-doomed") {
		t.Fatal("a tenant deleted after a failover lost this instance's changes still authenticates here")
	}
	if live("sk-corral-mine") {
		t.Fatal("a key the store lost in the failover still authenticates here")
	}
}

// mirrorTestServer is a Server holding only a tenant registry with no file
// tenants (store, when set, answers its tenant store's reads), and live
// reports whether a key authenticates in its registry.
func mirrorTestServer(t *testing.T, store tenantstore.Store) (*Server, func(key string) bool) {
	t.Helper()
	file, err := tenant.NewRegistry(nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{log: slog.New(slog.DiscardHandler)}
	s.sources.file, s.sources.store = file, store
	s.sources.parse = func([]byte) (tenant.Policy, error) { return tenant.Policy{MaxLeaders: 1}, nil }
	return s, func(key string) bool {
		_, ok := s.tenants.Load().Authenticate(key)
		return ok
	}
}

// storedWithKey is stored tenant id at version, holding key ("": none).
func storedWithKey(id string, version int64, key string) tenantstore.Tenant {
	t := tenantstore.Tenant{ID: id, Version: version, Policy: []byte(`{}`)}
	if key != "" {
		t.Keys = []tenantstore.Key{{ID: "key_" + id, SHA256: tenant.HashKey(key)}}
	}
	return t
}
