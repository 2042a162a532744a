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
	m := tenantstore.NewMirror(deaf{s}, func(_ int64, ts []tenantstore.Tenant) { loads <- ts }, tenantstore.MirrorOptions{Interval: 20 * time.Millisecond})
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
	m := tenantstore.NewMirror(b, func(_ int64, ts []tenantstore.Tenant) { loads <- ts }, tenantstore.MirrorOptions{Interval: time.Hour})
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
