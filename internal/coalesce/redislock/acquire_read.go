package redislock

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

//go:embed acquire_read.lua
var acquireReadLua string

var acquireReadScript = redis.NewScript(acquireReadLua)

// TryAcquireOrRead reads keys and, only when none of them holds a value,
// takes the lock name, atomically and in one round trip. When it takes the
// lock it also deletes clear (a previous holder's leftovers). A leader uses it
// to double-check for an answer and take the lock at once; a waiter uses it
// to look for the answer and take over from a dead leader at once. vals
// has one entry per key, nil where the key is absent. The keys must share
// the lock's hash tag (one Cluster slot), as a prompt's keys do.
func (l *Locker) TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (lease *Lease, ok bool, vals [][]byte, err error) {
	token := newToken(ctx)
	sent := time.Now()
	ctx, cancel := context.WithTimeout(ctx, l.opTimeout)
	defer cancel()
	args := []any{token, l.ttl.Milliseconds()}
	for _, c := range clear {
		args = append(args, c)
	}
	res, err := acquireReadScript.Run(ctx, l.rdb, append([]string{name}, keys...), args...).Slice()
	if err != nil {
		return nil, false, nil, fmt.Errorf("redislock: acquire-or-read: %w", err)
	}
	if len(res) != 2 {
		return nil, false, nil, fmt.Errorf("redislock: acquire-or-read: unexpected reply %v", res)
	}
	vals = make([][]byte, len(keys))
	if raw, isSlice := res[1].([]any); isSlice {
		for i := range min(len(raw), len(keys)) {
			if s, isStr := raw[i].(string); isStr {
				vals[i] = []byte(s)
			}
		}
	}
	if taken, _ := res[0].(int64); taken == 1 {
		return newLease(l, name, token, sent), true, vals, nil
	}
	return nil, false, vals, nil
}
