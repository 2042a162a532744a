package redislock

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/redistest"
)

// newBus starts a Bus on its own client (one gateway instance), waits until
// it is subscribed, and closes it at cleanup.
func newBus(tb testing.TB, srv *redistest.Server) *Bus {
	tb.Helper()
	b := NewBus(srv.Client(), BusOptions{Logger: testLogger(tb)})
	tb.Cleanup(func() { _ = b.Close() })
	waitClosed(tb, b.Ready(), 5*time.Second, "Bus ready")
	return b
}

func TestBusWakesWatchersOnOtherInstance(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	a, b := newBus(t, srv), newBus(t, srv)

	const n = 100
	xs := make([]<-chan struct{}, n)
	for i := range xs {
		ch, cancel := b.Watch("X")
		defer cancel()
		xs[i] = ch
	}
	y, cancelY := b.Watch("Y")
	defer cancelY()

	if err := a.Publish(ctx, "X"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for i, ch := range xs {
		waitClosed(t, ch, 5*time.Second, "watcher "+strconv.Itoa(i)+" of X")
	}
	// X's watchers were woken by the one dispatch that would have woken Y.
	if isClosed(y) {
		t.Fatal("watcher of Y woken by a done for X")
	}
	if got := b.watchers(); got != 1 {
		t.Fatalf("watchers after X fired = %d, want 1 (Y)", got)
	}
	if err := a.Publish(ctx, "Y"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	waitClosed(t, y, 5*time.Second, "watcher of Y")
}

func TestBusWatchCancelRemovesEntries(t *testing.T) {
	b := newBus(t, redistest.Start(t))
	var cancels []func()
	for i := range 10 {
		_, cancel := b.Watch("name" + strconv.Itoa(i%3))
		cancels = append(cancels, cancel)
	}
	if got := b.watchers(); got != 10 {
		t.Fatalf("watchers = %d, want 10", got)
	}
	for _, cancel := range cancels {
		cancel()
		cancel() // idempotent
	}
	if got, names := b.watchers(), len(b.watch); got != 0 || names != 0 {
		t.Fatalf("after cancel: %d watchers under %d names, want none", got, names)
	}

	// Cancel after firing is a no-op and does not touch later watchers.
	ch, cancel := b.Watch("Z")
	b.fire("Z")
	waitClosed(t, ch, time.Second, "fired watcher")
	later, cancelLater := b.Watch("Z")
	defer cancelLater()
	cancel()
	if got := b.watchers(); got != 1 || isClosed(later) {
		t.Fatalf("after late cancel: watchers %d, later closed %v; want 1, false", got, isClosed(later))
	}
	b.fire("nobody") // a done nobody watches is dropped
	if got := b.watchers(); got != 1 {
		t.Fatalf("watchers = %d, want 1", got)
	}
}

func TestBusResubscribesAfterOutage(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external server")
	}
	a, b := newBus(t, srv), newBus(t, srv)

	srv.Stop()
	eventually(t, 5*time.Second, "Bus noticing the outage", func() bool { return !b.Subscribed() })
	if err := a.Publish(ctx, "X"); err == nil {
		t.Fatal("Publish with Redis down: nil error")
	}
	srv.Restart()
	eventually(t, 5*time.Second, "Bus resubscribed", b.Subscribed)

	ch, cancel := b.Watch("X")
	defer cancel()
	if err := a.Publish(ctx, "X"); err != nil {
		t.Fatalf("Publish after restart: %v", err)
	}
	waitClosed(t, ch, 5*time.Second, "watcher woken after the outage")
}

// TestBusStartsWithRedisDown checks that a Bus created while Redis is down
// subscribes once it comes up, and that Close is idempotent.
func TestBusStartsWithRedisDown(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external server")
	}
	srv.Stop()
	b := NewBus(srv.Client(), BusOptions{Logger: testLogger(t)})
	defer b.Close()
	if isClosed(b.Ready()) {
		t.Fatal("Ready with Redis down")
	}
	srv.Restart()
	waitClosed(t, b.Ready(), 5*time.Second, "Ready after Redis came up")
	if err := b.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

// TestBusRecoversFromSilentConnection freezes the network between a Bus
// and a real redis-server without closing anything, as a partition leaves a
// half-open connection: no error ever arrives, so only the unanswered PING
// reveals it. The Bus must resubscribe once traffic flows again, and Close
// must not hang on a frozen connection.
func TestBusRecoversFromSilentConnection(t *testing.T) {
	ctx := context.Background()
	srv := redistest.Start(t)
	proxy := newFreezeProxy(t, srv.Addr())
	// ContextTimeoutEnabled bounds the handshake of a new connection by
	// OpTimeout too, as the package doc asks of production clients.
	rdb := redis.NewClient(&redis.Options{Addr: proxy.addr, ContextTimeoutEnabled: true})
	defer rdb.Close()
	const opTimeout = 100 * time.Millisecond
	b := NewBus(rdb, BusOptions{OpTimeout: opTimeout, PingInterval: 100 * time.Millisecond, Logger: testLogger(t)})
	defer b.Close()
	waitClosed(t, b.Ready(), 5*time.Second, "Bus ready")
	a := newBus(t, srv)

	proxy.freeze(true)
	eventually(t, 5*time.Second, "Bus noticing the silent connection", func() bool { return !b.Subscribed() })
	proxy.freeze(false)
	eventually(t, 5*time.Second, "Bus resubscribed", b.Subscribed)
	ch, cancel := b.Watch("X")
	defer cancel()
	if err := a.Publish(ctx, "X"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	waitClosed(t, ch, 5*time.Second, "watcher woken after the freeze")

	proxy.freeze(true)
	start := time.Now()
	_ = b.Close()
	if d := time.Since(start); d > opTimeout+time.Second {
		t.Fatalf("Close on a frozen connection took %v", d)
	}
}
