package server

import (
	"log/slog"
	"testing"

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
