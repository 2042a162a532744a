package redislock

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

// BenchmarkTryAcquireRelease is a leader's lock overhead: SET NX PX, start
// and stop the renewal goroutine, compare-and-delete.
func BenchmarkTryAcquireRelease(b *testing.B) {
	l := NewLocker(redistest.Start(b).Client(), Options{})
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		le, ok, err := l.TryAcquire(ctx, lockName)
		if err != nil || !ok {
			b.Fatalf("TryAcquire = %v, %v", ok, err)
		}
		if err := le.Release(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTryAcquireReleaseParallel runs leaders of different prompts at
// once, sharing one client as a gateway instance does.
func BenchmarkTryAcquireReleaseParallel(b *testing.B) {
	l := NewLocker(redistest.Start(b).Client(), Options{})
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		name := lockName + strconv.FormatInt(next.Add(1), 10)
		for pb.Next() {
			le, ok, err := l.TryAcquire(ctx, name)
			if err != nil || !ok {
				b.Errorf("TryAcquire = %v, %v", ok, err)
				return
			}
			if err := le.Release(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkPublishWake is the latency from a leader's Publish on one
// instance to a waiter's wake-up on another.
func BenchmarkPublishWake(b *testing.B) {
	benchPublishWake(b, 1)
}

// BenchmarkPublishWake100 wakes 100 waiters of one name per Publish.
func BenchmarkPublishWake100(b *testing.B) {
	benchPublishWake(b, 100)
}

func benchPublishWake(b *testing.B, waiters int) {
	srv := redistest.Start(b)
	opts := BusOptions{Logger: slog.New(slog.DiscardHandler)}
	pub, sub := NewBus(srv.Client(), opts), NewBus(srv.Client(), opts)
	defer pub.Close()
	defer sub.Close()
	waitClosed(b, sub.Ready(), 5*time.Second, "Bus ready")
	ctx := context.Background()
	chs := make([]<-chan struct{}, waiters)
	cancels := make([]func(), waiters)
	b.ReportAllocs()
	for b.Loop() {
		for i := range chs {
			chs[i], cancels[i] = sub.Watch(lockName)
		}
		if err := pub.Publish(ctx, lockName); err != nil {
			b.Fatal(err)
		}
		for i, ch := range chs {
			<-ch
			cancels[i]()
		}
	}
}
