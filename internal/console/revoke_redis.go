package console

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// RevokedKey is the Redis sorted set of signed-out console sessions:
// member the session id, score its expiry (Unix seconds). It is durable
// state (no TTL, so volatile-lru never evicts it and a signed-out cookie
// never comes back to life); each sign-out first deletes the members
// whose sessions have expired, so it holds only the last 12 hours'
// sign-outs.
const RevokedKey = "corral:v1:console:revoked"

// RedisRevocations keeps revoked sessions in Redis, where every instance
// reads them: a sign-out on one ends the session on all.
type RedisRevocations struct {
	rdb redis.Cmdable
	now func() time.Time
}

// NewRedisRevocations returns revocations kept in rdb (nil now: the wall
// clock).
func NewRedisRevocations(rdb redis.Cmdable, now func() time.Time) *RedisRevocations {
	if now == nil {
		now = time.Now
	}
	return &RedisRevocations{rdb: rdb, now: now}
}

// Revoke implements Revocations.
func (r *RedisRevocations) Revoke(ctx context.Context, id string, until time.Time) error {
	_, err := r.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.ZRemRangeByScore(ctx, RevokedKey, "-inf", "("+strconv.FormatInt(r.now().Unix(), 10))
		p.ZAdd(ctx, RevokedKey, redis.Z{Score: float64(until.Unix()), Member: id})
		return nil
	})
	if err != nil {
		return fmt.Errorf("console: revoke session: %w", err)
	}
	return nil
}

// Revoked implements Revocations.
func (r *RedisRevocations) Revoked(ctx context.Context, id string) (bool, error) {
	_, err := r.rdb.ZScore(ctx, RevokedKey, id).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("console: read revoked sessions: %w", err)
	}
	return true, nil
}
