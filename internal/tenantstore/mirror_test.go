package tenantstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenantstore"
)

// deaf is a store whose notifications never come: every change is a lost
// message, which only the resync can heal.
type deaf struct{ tenantstore.Store }

func (deaf) Notifications(ctx context.Context) <-chan struct{} { return make(chan struct{}) }

// TestMirrorResyncHealsALostNotification: with no notification at all, a
// change reaches the mirror at the next resync; Run's goroutine ends with
// its context (goleak).
func TestMirrorResyncHealsALostNotification(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := tenantstore.NewRedis(redistest.Client(t), tenantstore.RedisOptions{})
	loads := make(chan []tenantstore.Tenant, 16)
	m := tenantstore.NewMirror(deaf{s}, func(l tenantstore.Load) { loads <- l.Tenants }, tenantstore.MirrorOptions{Interval: 20 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { m.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	if first := <-loads; len(first) != 0 {
		t.Fatalf("first load = %v", first)
	}
	if _, _, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "late"}, meta()); err != nil {
		t.Fatal(err)
	}
	select {
	case ts := <-loads:
		if len(ts) != 1 || ts[0].ID != "late" {
			t.Errorf("resync loaded %v", ts)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the resync never loaded the change")
	}
	select {
	case ts := <-loads:
		t.Errorf("a resync with an unchanged revision loaded again: %v", ts)
	case <-time.After(100 * time.Millisecond): // five resync periods with nothing changed
	}
}

// TestMirrorHearsNotifications: a change is loaded at once through the
// store's notifications (interval far longer than the test).
func TestMirrorHearsNotifications(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	b, err := tenantstore.OpenBolt(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	loads := make(chan []tenantstore.Tenant, 16)
	m := tenantstore.NewMirror(b, func(l tenantstore.Load) { loads <- l.Tenants }, tenantstore.MirrorOptions{Interval: time.Hour})
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { m.Run(ctx) })
	defer func() { cancel(); wg.Wait() }()
	<-loads
	if _, _, err := b.Apply(ctx, tenantstore.TenantCreated{ID: "heard"}, meta()); err != nil {
		t.Fatal(err)
	}
	if ts := <-loads; len(ts) != 1 || ts[0].ID != "heard" {
		t.Errorf("notified load = %v", ts)
	}
}

// TestRedisNotificationsEndWithTheirContext: the subscription's goroutine
// is gone once its context ends, even on a quiet channel (goleak).
func TestRedisNotificationsEndWithTheirContext(t *testing.T) {
	rdb := redistest.Client(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	s := tenantstore.NewRedis(rdb, tenantstore.RedisOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	notes := s.Notifications(ctx)
	<-notes // subscribed
	cancel()
}

// TestRedisStoreThatLostItsDataStartsANewEpoch: after a FLUSHALL the
// store's revision counts from 1 again, under a new epoch, whether the
// first to notice is a change or a read of the revision; the epoch then
// stays.
func TestRedisStoreThatLostItsDataStartsANewEpoch(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := tenantstore.NewRedis(rdb, tenantstore.RedisOptions{})
	mustApply(t, s, tenantstore.TenantCreated{ID: "one"})
	mustApply(t, s, tenantstore.TenantCreated{ID: "two"})
	before, err := s.Revision(ctx)
	if err != nil || before.N != 2 || before.Epoch == "" {
		t.Fatalf("revision before the loss = %+v, %v; want N 2 and an epoch", before, err)
	}
	for _, first := range []string{"a change", "a read"} {
		if err := rdb.FlushAll(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		var after tenantstore.Revision
		if first == "a change" {
			_, ev, err := s.Apply(ctx, tenantstore.TenantCreated{ID: "three"}, meta())
			if err != nil {
				t.Fatal(err)
			}
			after = ev.Revision
		} else if after, err = s.Revision(ctx); err != nil {
			t.Fatal(err)
		}
		if after.Epoch == "" || after.Epoch == before.Epoch {
			t.Errorf("%s after a FLUSHALL: epoch %q; want a new one (was %q)", first, after.Epoch, before.Epoch)
		}
		if again, _ := s.Revision(ctx); again.Epoch != after.Epoch {
			t.Errorf("%s after a FLUSHALL: epoch %q, then %q; want it kept", first, after.Epoch, again.Epoch)
		}
		before = after
	}
}

// TestMirrorTellsARewoundStore: a revision that went back within its
// epoch (a failover to a replica behind) is handed on as Rewound; a
// revision that moved on, or one of another epoch, is not.
func TestMirrorTellsARewoundStore(t *testing.T) {
	ctx := context.Background()
	rdb := redistest.Client(t)
	s := tenantstore.NewRedis(rdb, tenantstore.RedisOptions{})
	var loads []tenantstore.Load
	m := tenantstore.NewMirror(s, func(l tenantstore.Load) { loads = append(loads, l) }, tenantstore.MirrorOptions{})
	load := func() tenantstore.Load {
		t.Helper()
		if err := m.Load(ctx); err != nil {
			t.Fatal(err)
		}
		return loads[len(loads)-1]
	}
	for _, id := range []string{"a", "b", "c"} {
		mustApply(t, s, tenantstore.TenantCreated{ID: id})
	}
	if l := load(); l.Rewound || l.Rev.N != 3 {
		t.Fatalf("first load = %+v", l)
	}
	mustApply(t, s, tenantstore.TenantCreated{ID: "d"})
	if l := load(); l.Rewound || l.Rev.N != 4 {
		t.Fatalf("load after a change = %+v", l)
	}
	// The replica promoted had seen two changes fewer.
	if err := rdb.Set(ctx, "corral:v1:{admin}:rev", 2, 0).Err(); err != nil {
		t.Fatal(err)
	}
	if l := load(); !l.Rewound || l.Rev.N != 2 {
		t.Errorf("load of a rewound store = %+v; want Rewound", l)
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if l := load(); l.Rewound || l.Rev.N != 0 || l.Rev.Epoch == loads[0].Rev.Epoch {
		t.Errorf("load of a flushed store = %+v; want a new epoch, not Rewound", l)
	}
}
