package objects

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

// testStore runs the Store contract on s.
func testStore(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	a := Owner{Tenant: "a", Upstream: "default", Kind: "file", Created: time.Unix(1700000000, 0).UTC()}
	b := Owner{Tenant: "b", Upstream: "default", Kind: "file", Created: time.Unix(1700000001, 0).UTC()}
	got, err := s.Claim(ctx, "file-1", a)
	if err != nil || got != a {
		t.Fatalf("first Claim = %+v, %v; want %+v", got, err, a)
	}
	// A second claim never moves the object to another tenant.
	if got, err := s.Claim(ctx, "file-1", b); err != nil || got != a {
		t.Fatalf("second Claim = %+v, %v; want the first owner %+v", got, err, a)
	}
	owners, err := s.Get(ctx, []string{"file-1", "file-unknown"})
	if err != nil || len(owners) != 2 || owners[0] == nil || *owners[0] != a || owners[1] != nil {
		t.Fatalf("Get = %v, %v; want [a, nil]", owners, err)
	}
	if err := s.Set(ctx, "file-1", b); err != nil {
		t.Fatal(err)
	}
	if owners, _ := s.Get(ctx, []string{"file-1"}); owners[0] == nil || *owners[0] != b {
		t.Fatalf("after Set: %v; want b", owners)
	}
	if err := s.Delete(ctx, "file-1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "file-1"); err != nil {
		t.Fatalf("deleting a missing record: %v", err)
	}
	if owners, _ := s.Get(ctx, []string{"file-1"}); owners[0] != nil {
		t.Fatalf("after Delete: %v; want none", owners)
	}
	if owners, err := s.Get(ctx, nil); err != nil || len(owners) != 0 {
		t.Fatalf("Get(nil) = %v, %v", owners, err)
	}
}

func TestMemoryStore(t *testing.T) {
	testStore(t, NewMemory(0))
	m := NewMemory(1)
	if _, err := m.Claim(context.Background(), "x", Owner{Tenant: "a"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Claim(context.Background(), "y", Owner{Tenant: "a"}); !errors.Is(err, ErrFull) {
		t.Fatalf("claim past the maximum: %v; want ErrFull", err)
	}
}

func TestBoltStoreSurvivesReopen(t *testing.T) {
	dir := t.TempDir()
	b, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	testStore(t, b)
	o := Owner{Tenant: "a", Upstream: "default", Kind: "batch", Created: time.Unix(1700000000, 0).UTC()}
	if _, err := b.Claim(context.Background(), "batch_1", o); err != nil {
		t.Fatal(err)
	}
	// A second gateway on the same data dir is refused, not corrupting it.
	if _, err := OpenBolt(dir); err == nil {
		t.Fatal("a second open of a data dir in use succeeded")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2, err := OpenBolt(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	owners, err := b2.Get(context.Background(), []string{"batch_1"})
	if err != nil || owners[0] == nil || *owners[0] != o {
		t.Fatalf("after reopen: %v, %v; want %+v", owners, err, o)
	}
}

func TestRedisStore(t *testing.T) {
	rdb := redistest.Client(t)
	s := NewRedis(rdb, RedisOptions{})
	testStore(t, s)
	if _, err := s.Claim(context.Background(), "resp_1", Owner{Tenant: "a", Kind: "response"}); err != nil {
		t.Fatal(err)
	}
	// The record has no TTL: volatile-* eviction never drops an owner.
	if ttl := rdb.TTL(context.Background(), RedisKey("resp_1")).Val(); ttl != -1 {
		t.Fatalf("TTL of an ownership key = %v; want none (-1)", ttl)
	}
	if k := RedisKey("resp_1"); k != "corral:v1:o:{resp_1}" {
		t.Fatalf("key = %q", k)
	}
}
