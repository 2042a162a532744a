package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

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

// BenchmarkHitRead compares the two ways a hit can be read: the plain
// MGET of the prompt's entry and negative keys that a non-streaming
// request makes before joining a flight, and the acquire-or-read script
// a streaming request goes straight to (which finds the entry and takes
// no lock). It is why non-streaming requests keep their MGET: hits are
// what the cache is for, and the script costs a hit more, in the gateway
// and in Redis (redis-µs/op: Redis's own time per call, from INFO
// commandstats).
func BenchmarkHitRead(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client()
	l := NewLocker(rdb, Options{})
	ctx := context.Background()
	prefix := strings.TrimSuffix(lockName, ":l")
	entryKey, negKey := prefix+":r", prefix+":n"
	if err := rdb.Set(ctx, entryKey, make([]byte, 1024), 0).Err(); err != nil {
		b.Fatal(err)
	}
	tests := []struct {
		name, cmd string // cmd: the command INFO commandstats counts
		read      func() error
	}{
		{"mget", "mget", func() error {
			vals, err := rdb.MGet(ctx, entryKey, negKey).Result()
			if err == nil && vals[0] == nil {
				err = errors.New("entry not read")
			}
			return err
		}},
		{"acquire-or-read", "evalsha", func() error {
			_, ok, vals, err := l.TryAcquireOrRead(ctx, lockName, []string{entryKey, negKey})
			if err == nil && (ok || vals[0] == nil) {
				err = fmt.Errorf("took the lock %v, read %v", ok, vals)
			}
			return err
		}},
	}
	for _, tt := range tests {
		b.Run(tt.name, func(b *testing.B) {
			if err := tt.read(); err != nil { // loads the script
				b.Fatal(err)
			}
			if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if err := tt.read(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(redisUsecPerCall(b, rdb, tt.cmd), "redis-µs/op")
		})
	}
}

// redisUsecPerCall is Redis's own time per call of cmd since the last
// CONFIG RESETSTAT.
func redisUsecPerCall(b *testing.B, rdb *redis.Client, cmd string) float64 {
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(info) {
		stats, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_"+cmd+":")
		if !ok {
			continue
		}
		for field := range strings.SplitSeq(stats, ",") {
			if v, ok := strings.CutPrefix(field, "usec_per_call="); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					b.Fatal(err)
				}
				return f
			}
		}
	}
	b.Fatalf("no commandstats for %s in %q", cmd, info)
	return 0
}
