package objects

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyPrefix starts every ownership key: corral:v1:o:{<object id>}. The id
// is the hash tag, so each record is one key in one slot and every command
// here touches one key; nothing needs a multi-key slot.
const KeyPrefix = "corral:v1:o:"

// Redis is the distributed Store: one string key per object holding its
// owner as JSON, without a TTL, so a maxmemory policy of volatile-lru
// (which evicts only keys that have one) never drops an owner.
type Redis struct {
	rdb     redis.Cmdable
	timeout time.Duration
}

var _ Store = (*Redis)(nil)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	// Timeout bounds each call. Default 500ms.
	Timeout time.Duration
}

// NewRedis returns a Redis store over rdb (a client, a cluster client or
// a failover client).
func NewRedis(rdb redis.Cmdable, o RedisOptions) *Redis {
	if o.Timeout <= 0 {
		o.Timeout = 500 * time.Millisecond
	}
	return &Redis{rdb: rdb, timeout: o.Timeout}
}

// RedisKey is the key holding id's owner.
func RedisKey(id string) string { return KeyPrefix + "{" + id + "}" }

// Claim implements Store with SET NX GET: one round trip that either
// writes the record or returns the one already there.
func (r *Redis) Claim(ctx context.Context, id string, o Owner) (Owner, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	b, err := encodeOwner(o)
	if err != nil {
		return Owner{}, err
	}
	prev, err := r.rdb.SetArgs(ctx, RedisKey(id), b, redis.SetArgs{Mode: "NX", Get: true}).Result()
	if errors.Is(err, redis.Nil) {
		return o, nil
	}
	if err != nil {
		return Owner{}, fmt.Errorf("objects: claim: %w", err)
	}
	p, err := decodeOwner([]byte(prev))
	if err != nil {
		return Owner{}, err
	}
	return *p, nil
}

// Get implements Store with one pipelined GET per id (each its own slot).
func (r *Redis) Get(ctx context.Context, ids []string) ([]*Owner, error) {
	out := make([]*Owner, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	cmds := make([]*redis.StringCmd, len(ids))
	_, err := r.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, id := range ids {
			cmds[i] = p.Get(ctx, RedisKey(id))
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("objects: get: %w", err)
	}
	for i, c := range cmds {
		b, err := c.Bytes()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("objects: get: %w", err)
		}
		if out[i], err = decodeOwner(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Set implements Store.
func (r *Redis) Set(ctx context.Context, id string, o Owner) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	b, err := encodeOwner(o)
	if err != nil {
		return err
	}
	if err := r.rdb.Set(ctx, RedisKey(id), b, 0).Err(); err != nil {
		return fmt.Errorf("objects: set: %w", err)
	}
	return nil
}

// Delete implements Store.
func (r *Redis) Delete(ctx context.Context, id string) error {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := r.rdb.Del(ctx, RedisKey(id)).Err(); err != nil {
		return fmt.Errorf("objects: delete: %w", err)
	}
	return nil
}
