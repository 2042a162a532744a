package ratelimit

import (
	"context"
	"strconv"
	"testing"

	"github.com/corralhq/corral/internal/redistest"
)

// A large limit keeps every decision on the allowed path, as most are.
var benchLimit = PerSecond(1_000_000_000)

func BenchmarkMemoryAllowN(b *testing.B) {
	m := NewMemory(MemoryOptions{})
	keys := benchKeys(b, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			if _, err := m.AllowN(ctx, keys[i%len(keys)], benchLimit, 1); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func BenchmarkRedisAllowN(b *testing.B) {
	l := NewRedis(redistest.Start(b).Client(), RedisOptions{})
	keys := benchKeys(b, 100)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		i := 0
		for pb.Next() {
			if _, err := l.AllowN(ctx, keys[i%len(keys)], benchLimit, 1); err != nil {
				b.Error(err)
				return
			}
			i++
		}
	})
}

func benchKeys(tb testing.TB, n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = mustKey(tb, "tenant"+strconv.Itoa(i), Requests)
	}
	return keys
}
