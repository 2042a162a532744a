package server

import (
	"fmt"
	"log/slog"
	"slices"
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

	s.SetAPITenants(5, []tenantstore.Tenant{before}) // the tenant's creation, loaded
	s.setAPITenant("acme", &after, 6)                // this instance makes a key
	s.SetAPITenants(5, []tenantstore.Tenant{before}) // a load that listed before the key
	if _, ok := s.tenants.Load().Authenticate(key); !ok {
		t.Fatal("the key made at revision 6 was taken back by a load of revision 5")
	}
	s.setAPITenant("acme", &before, 5) // an older change of the same tenant, applied late
	if _, ok := s.tenants.Load().Authenticate(key); !ok {
		t.Fatal("an older change of the tenant replaced a newer one")
	}
	s.SetAPITenants(7, nil) // a newer load: the tenant is gone everywhere
	if _, ok := s.tenants.Load().Authenticate(key); ok {
		t.Fatal("a newer load was dropped")
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
	s.SetAPITenants(1, ts)
	if parsed != 100 {
		t.Fatalf("first load parsed %d policies; want 100", parsed)
	}
	reg := s.tenants.Load()
	s.SetAPITenants(2, slices.Clone(ts))
	if parsed != 100 || s.tenants.Load() != reg {
		t.Fatalf("an unchanged load parsed %d policies (want 100) or swapped the registry", parsed)
	}
	next := slices.Clone(ts)
	next[3].Version, next[3].UpdatedAt, next[3].Policy = 2, created.Add(time.Minute), []byte(`{"requests_per_minute":7}`)
	next[4].CreatedAt, next[4].UpdatedAt, next[4].Policy = created.Add(time.Hour), created.Add(time.Hour), []byte(`{"requests_per_minute":7}`) // deleted and made again
	next = slices.Delete(next, 5, 6)
	s.SetAPITenants(3, next)
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
