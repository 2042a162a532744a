package ratelimit

import (
	"context"
	"strconv"
	"testing"

	"github.com/corralhq/corral/internal/redistest"
)

// A large limit keeps every decision on the allowed path, as most are.
var benchLimit = PerSecond(1_000_000_000)

func BenchmarkMemoryAllowN(b *testing.B) { benchAllowN(b, NewMemory(MemoryOptions{})) }

func BenchmarkRedisAllowN(b *testing.B) {
	benchAllowN(b, NewRedis(redistest.Start(b).Client(), RedisOptions{}))
}

// benchAllowN takes one token at a time from 100 keys, in parallel.
func benchAllowN(b *testing.B, l Limiter) {
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
