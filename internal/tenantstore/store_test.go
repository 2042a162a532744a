package tenantstore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenantstore"
)

// stores runs f against both implementations: a real redis-server and a
// bbolt file in a temp dir.
func stores(t *testing.T, f func(t *testing.T, s tenantstore.Store)) {
	t.Run("redis", func(t *testing.T) {
		f(t, tenantstore.NewRedis(redistest.Client(t), tenantstore.RedisOptions{}))
	})
	t.Run("bolt", func(t *testing.T) {
		b, err := tenantstore.OpenBolt(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = b.Close() })
		f(t, b)
	})
}

var at = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

func meta() tenantstore.Meta { return tenantstore.Meta{Time: at, Remote: "192.0.2.1:5555"} }

func TestApplyLifecycle(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		created, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme", Policy: json.RawMessage(`{"requests_per_minute":10}`)}, meta())
		if err != nil {
			t.Fatal(err)
		}
		if created.Version != 1 || string(created.Policy) != `{"requests_per_minute":10}` {
			t.Errorf("created = %+v", created)
		}
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); !errors.Is(err, tenantstore.ErrExists) {
			t.Errorf("second create: %v; want ErrExists", err)
		}
		k := tenantstore.Key{ID: "key_1", Name: "ci", SHA256: "ab", Prefix: "sk-corral-ab", CreatedAt: at}
		if _, _, err := s.Apply(ctx, tenantstore.KeyCreated{Tenant: "acme", Key: k}, meta()); err != nil {
			t.Fatal(err)
		}
		up, _, err := s.Apply(ctx, tenantstore.TenantUpdated{ID: "acme", Patch: json.RawMessage(`{"requests_per_minute":null,"cache_ttl":"5m"}`)}, meta())
		if err != nil {
			t.Fatal(err)
		}
		if string(up.Policy) != `{"cache_ttl":"5m"}` || up.Version != 3 || len(up.Keys) != 1 {
			t.Errorf("updated = %+v", up)
		}
		if _, _, err := s.Apply(ctx, tenantstore.KeyRevoked{Tenant: "acme", KeyID: "key_2"}, meta()); !errors.Is(err, tenantstore.ErrKeyNotFound) {
			t.Errorf("revoke unknown: %v", err)
		}
		if _, _, err := s.Apply(ctx, tenantstore.KeyRevoked{Tenant: "acme", KeyID: "key_1"}, meta()); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get(ctx, "acme")
		if err != nil || len(got.Keys) != 0 {
			t.Errorf("Get after revoke = %+v, %v", got, err)
		}
		if _, _, err := s.Apply(ctx, tenantstore.TenantDeleted{ID: "acme"}, meta()); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Get(ctx, "acme"); !errors.Is(err, tenantstore.ErrNotFound) {
			t.Errorf("Get after delete: %v", err)
		}
		for _, c := range []tenantstore.Change{tenantstore.TenantDeleted{ID: "acme"}, tenantstore.KeyCreated{Tenant: "acme", Key: k}, tenantstore.TenantUpdated{ID: "acme", Patch: json.RawMessage(`{}`)}} {
			if _, _, err := s.Apply(ctx, c, meta()); !errors.Is(err, tenantstore.ErrNotFound) {
				t.Errorf("%T on a deleted tenant: %v", c, err)
			}
		}
		evs, err := s.Audit(ctx, 100)
		if err != nil {
			t.Fatal(err)
		}
		var got2 []string
		for _, e := range evs {
			got2 = append(got2, fmt.Sprintf("%s %s %s %s", e.Action, e.Tenant, e.KeyID, e.Remote))
		}
		want := []string{
			"tenant.deleted acme  192.0.2.1:5555",
			"key.revoked acme key_1 192.0.2.1:5555",
			"tenant.updated acme  192.0.2.1:5555",
			"key.created acme key_1 192.0.2.1:5555",
			"tenant.created acme  192.0.2.1:5555",
		}
		if d := cmp.Diff(want, got2); d != "" {
			t.Errorf("audit (-want +got):\n%s", d)
		}
		if evs, _ := s.Audit(ctx, 2); len(evs) != 2 || evs[0].Action != tenantstore.ActionTenantDeleted {
			t.Errorf("Audit(2) = %+v", evs)
		}
	})
}

func TestCheckRefusesAndWritesNothing(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme", Policy: json.RawMessage(`{"max_leaders":2}`)}, meta()); err != nil {
			t.Fatal(err)
		}
		refuse := errors.New("max_leaders: must be at least 1")
		_, _, err := s.Apply(ctx, tenantstore.TenantUpdated{ID: "acme", Patch: json.RawMessage(`{"max_leaders":0}`),
			Check: func(json.RawMessage) error { return refuse }}, meta())
		var ce *tenantstore.CheckError
		if !errors.As(err, &ce) || !errors.Is(err, refuse) {
			t.Fatalf("Apply = %v; want a CheckError wrapping the refusal", err)
		}
		got, _ := s.Get(ctx, "acme")
		if string(got.Policy) != `{"max_leaders":2}` || got.Version != 1 {
			t.Errorf("after a refused patch: %+v", got)
		}
		if evs, _ := s.Audit(ctx, 10); len(evs) != 1 {
			t.Errorf("a refused patch was audited: %+v", evs)
		}
	})
}

// TestConcurrentPatchesAllLand: 20 PATCHes of different fields at once
// all apply, because each merges into the latest version.
func TestConcurrentPatchesAllLand(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); err != nil {
			t.Fatal(err)
		}
		const n = 20
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				_, _, err := s.Apply(ctx, tenantstore.TenantUpdated{ID: "acme", Patch: json.RawMessage(fmt.Sprintf(`{"f%02d":%d}`, i, i))}, meta())
				errs <- err
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		got, _ := s.Get(ctx, "acme")
		var p map[string]int
		if err := json.Unmarshal(got.Policy, &p); err != nil {
			t.Fatal(err)
		}
		if len(p) != n || got.Version != n+1 {
			t.Errorf("policy has %d of %d fields, version %d: %s", len(p), n, got.Version, got.Policy)
		}
	})
}

// TestAuditKeepsTheNewest runs on Redis only: 10,000 fsynced bbolt
// commits take minutes, and the bbolt trim is the same sequence arithmetic.
func TestAuditKeepsTheNewest(t *testing.T) {
	func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); err != nil {
			t.Fatal(err)
		}
		for i := range tenantstore.AuditKept + 5 {
			if _, _, err := s.Apply(ctx, tenantstore.TenantUpdated{ID: "acme", Patch: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i))},
				tenantstore.Meta{Time: at.Add(time.Duration(i) * time.Second)}); err != nil {
				t.Fatal(err)
			}
		}
		evs, err := s.Audit(ctx, 20_000)
		if err != nil {
			t.Fatal(err)
		}
		if len(evs) != tenantstore.AuditKept {
			t.Fatalf("kept %d events; want %d", len(evs), tenantstore.AuditKept)
		}
		if newest := at.Add((tenantstore.AuditKept + 4) * time.Second); !evs[0].Time.Equal(newest) {
			t.Errorf("first event at %v; want the newest, %v", evs[0].Time, newest)
		}
	}(t, tenantstore.NewRedis(redistest.Client(t), tenantstore.RedisOptions{}))
}

func TestNotificationsAndRevision(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		notes := s.Notifications(ctx)
		rev0, err := s.Revision(ctx)
		if err != nil {
			t.Fatal(err)
		}
		// Redis announces its subscription; drain it once it is there.
		deadline := time.After(5 * time.Second)
		if _, ok := s.(*tenantstore.Redis); ok {
			select {
			case <-notes:
			case <-deadline:
				t.Fatal("no subscription notice")
			}
		}
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); err != nil {
			t.Fatal(err)
		}
		select {
		case <-notes:
		case <-deadline:
			t.Fatal("no notification of a change")
		}
		if rev, _ := s.Revision(ctx); rev.N != rev0.N+1 || rev.Epoch != rev0.Epoch || rev.Epoch == "" {
			t.Errorf("revision %v after one change from %v", rev, rev0)
		}
	})
}

func TestTouchAndLastUsed(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		mustApply(t, s, tenantstore.TenantCreated{ID: "acme"})
		mustApply(t, s, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: "key_a", SHA256: "aa"}})
		// key_b is not acme's: its use is not recorded.
		if err := s.Touch(ctx, map[string]tenantstore.Use{"key_a": {Tenant: "acme", At: at}, "key_b": {Tenant: "acme", At: at}}); err != nil {
			t.Fatal(err)
		}
		got, err := s.LastUsed(ctx, []string{"key_a", "key_b"})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]time.Time{"key_a": at}, got); d != "" {
			t.Errorf("LastUsed (-want +got):\n%s", d)
		}
	})
}

// TestLastUsedNeverGoesBack: two instances write their uses of one key in
// either order; the later use stays, so an instance whose last use of the
// key is older does not turn the key's last use back.
func TestLastUsedNeverGoesBack(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		mustApply(t, s, tenantstore.TenantCreated{ID: "acme"})
		mustApply(t, s, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: "key_a", SHA256: "aa"}})
		later := at.Add(3 * time.Minute)
		for _, u := range []time.Time{later, at} {
			if err := s.Touch(ctx, map[string]tenantstore.Use{"key_a": {Tenant: "acme", At: u}}); err != nil {
				t.Fatal(err)
			}
		}
		got, err := s.LastUsed(ctx, []string{"key_a"})
		if err != nil {
			t.Fatal(err)
		}
		if !got["key_a"].Equal(later) {
			t.Errorf("LastUsed = %v; want the later use %v", got["key_a"], later)
		}
	})
}

// TestRevokedKeysLeaveNoLastUse: revoking a key, or deleting its tenant,
// removes the key's last-use entry, and a use noted before the revoke
// (written by an instance's next Touch) does not bring it back, so the
// durable last-use records hold only live keys.
func TestRevokedKeysLeaveNoLastUse(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		mustApply(t, s, tenantstore.TenantCreated{ID: "acme"})
		for _, id := range []string{"key_a", "key_b", "key_c"} {
			mustApply(t, s, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: id, SHA256: id}})
		}
		uses := map[string]tenantstore.Use{"key_a": {"acme", at}, "key_b": {"acme", at}, "key_c": {"acme", at}}
		if err := s.Touch(ctx, uses); err != nil {
			t.Fatal(err)
		}
		mustApply(t, s, tenantstore.KeyRevoked{Tenant: "acme", KeyID: "key_a"})
		if err := s.Touch(ctx, uses); err != nil { // a use noted before the revoke
			t.Fatal(err)
		}
		got, err := s.LastUsed(ctx, []string{"key_a", "key_b", "key_c"})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(map[string]time.Time{"key_b": at, "key_c": at}, got); d != "" {
			t.Errorf("after a revoke (-want +got):\n%s", d)
		}
		mustApply(t, s, tenantstore.TenantDeleted{ID: "acme"})
		if err := s.Touch(ctx, uses); err != nil {
			t.Fatal(err)
		}
		if got, err := s.LastUsed(ctx, []string{"key_a", "key_b", "key_c"}); err != nil || len(got) != 0 {
			t.Errorf("after deleting the tenant: %v, %v; want none", got, err)
		}
	})
}

func mustApply(t *testing.T, s tenantstore.Store, c tenantstore.Change) {
	t.Helper()
	if _, _, err := s.Apply(context.Background(), c, meta()); err != nil {
		t.Fatal(err)
	}
}

// TestRedisKeysAreDurable: no tenant-store key carries a TTL, so a
// volatile-* eviction policy never takes one.
func TestRedisKeysAreDurable(t *testing.T) {
	rdb := redistest.Client(t)
	s := tenantstore.NewRedis(rdb, tenantstore.RedisOptions{})
	ctx := context.Background()
	if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: "key_a", SHA256: "aa"}})
	if err := s.Touch(ctx, map[string]tenantstore.Use{"key_a": {Tenant: "acme", At: at}}); err != nil {
		t.Fatal(err)
	}
	keys, err := rdb.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 5 {
		t.Errorf("keys = %v; want tenants, audit, rev, epoch, used", keys)
	}
	for _, k := range keys {
		if ttl, _ := rdb.TTL(ctx, k).Result(); ttl != -1 {
			t.Errorf("TTL %s = %v; want -1 (none)", k, ttl)
		}
	}
}

func TestBoltRefusesASecondProcess(t *testing.T) {
	dir := t.TempDir()
	b, err := tenantstore.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b2, err := tenantstore.OpenBolt(dir); err == nil {
		_ = b2.Close()
		t.Fatal("a second open of one data dir succeeded")
	}
}

func TestBoltKeepsTenantsAcrossReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := tenantstore.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, _, err := b.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta()); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.Apply(ctx, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: "key_1", SHA256: "ab"}}, meta()); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	b, err = tenantstore.OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.Get(ctx, "acme")
	if err != nil || len(got.Keys) != 1 || got.Keys[0].ID != "key_1" {
		t.Errorf("after reopen: %+v, %v", got, err)
	}
	if evs, _ := b.Audit(ctx, 10); len(evs) != 2 {
		t.Errorf("audit after reopen: %+v", evs)
	}
}

func TestMergePatch(t *testing.T) {
	tests := []struct {
		doc, patch, want string
	}{
		{`{"a":1,"b":2}`, `{"b":null}`, `{"a":1}`},
		{`{"a":1}`, `{"b":{"c":1}}`, `{"a":1,"b":{"c":1}}`},
		{`{"m":["x"]}`, `{"m":["y","z"]}`, `{"m":["y","z"]}`},
		{``, `{"a":1.50}`, `{"a":1.50}`},
	}
	for _, tt := range tests {
		got, err := tenantstore.MergePatch(json.RawMessage(tt.doc), json.RawMessage(tt.patch))
		if err != nil || string(got) != tt.want {
			t.Errorf("MergePatch(%s, %s) = %s, %v; want %s", tt.doc, tt.patch, got, err, tt.want)
		}
	}
	if _, err := tenantstore.MergePatch(json.RawMessage(`{}`), json.RawMessage(`[1]`)); err == nil {
		t.Error("a patch that is not an object was applied")
	}
}

// TestRedisClusterStore: on a real Redis Cluster every change script
// touches one slot, listing needs no SCAN, and notifications arrive.
func TestRedisClusterStore(t *testing.T) {
	c := redistest.StartCluster(t, 3, 0)
	s := tenantstore.NewRedis(c.Client(), tenantstore.RedisOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	notes := s.Notifications(ctx)
	select {
	case <-notes: // subscribed: messages come after this on the connection
	case <-time.After(5 * time.Second):
		t.Fatal("no subscription on a cluster")
	}
	for _, id := range []string{"a", "b", "c", "d"} {
		if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: id}, meta()); err != nil {
			t.Fatalf("create %s on a cluster: %v", id, err)
		}
	}
	if _, _, err := s.Apply(ctx, tenantstore.KeyCreated{Tenant: "b", Key: tenantstore.Key{ID: "key_1", SHA256: "ab"}}, meta()); err != nil {
		t.Fatal(err)
	}
	ts, err := s.List(ctx)
	if err != nil || len(ts) != 4 || len(ts[1].Keys) != 1 {
		t.Fatalf("List = %+v, %v", ts, err)
	}
	if evs, err := s.Audit(ctx, 10); err != nil || len(evs) != 5 {
		t.Errorf("Audit = %d events, %v", len(evs), err)
	}
	select {
	case <-notes:
	case <-time.After(5 * time.Second):
		t.Error("no change notification on a cluster")
	}
}

// TestRecreatedTenantHasANewGeneration: a tenant made again under a
// deleted one's id gets a generation of its own; changes keep it.
func TestRecreatedTenantHasANewGeneration(t *testing.T) {
	stores(t, func(t *testing.T, s tenantstore.Store) {
		ctx := context.Background()
		first, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta())
		if err != nil || len(first.Generation) != 12 {
			t.Fatalf("created %+v, %v; want a 12-digit generation", first, err)
		}
		keyed, _, err := s.Apply(ctx, tenantstore.KeyCreated{Tenant: "acme", Key: tenantstore.Key{ID: "key_a", SHA256: "aa"}}, meta())
		if err != nil || keyed.Generation != first.Generation {
			t.Errorf("after a change: generation %q, %v; want %q kept", keyed.Generation, err, first.Generation)
		}
		mustApply(t, s, tenantstore.TenantDeleted{ID: "acme"})
		again, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "acme"}, meta())
		if err != nil || again.Generation == "" || again.Generation == first.Generation {
			t.Errorf("made again: generation %q, %v; want a new one (was %q)", again.Generation, err, first.Generation)
		}
	})
}
