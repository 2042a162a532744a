package cache

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"
)

// MultiGetter reads several keys in one round trip. The gateway reads a
// prompt's positive and negative entries together with it, so a miss
// costs one Redis round trip, not two.
type MultiGetter interface {
	// GetMany returns one entry per key, nil where the key holds no usable
	// entry (absent, expired or corrupt). err is a store failure.
	GetMany(ctx context.Context, keys ...string) ([]*Entry, error)
}

var (
	_ MultiGetter = (*Memory)(nil)
	_ MultiGetter = (*Redis)(nil)
)

// GetMany looks each key up in memory.
func (m *Memory) GetMany(ctx context.Context, keys ...string) ([]*Entry, error) {
	out := make([]*Entry, len(keys))
	for i, k := range keys {
		if it, ok := m.c.GetIfPresent(k); ok {
			out[i] = it.e
		}
	}
	return out, nil
}

// GetMany is one MGET. Keys of one prompt share a hash tag, so MGET is
// valid on Redis Cluster for them. Large entries are shared as Get shares
// them.
func (r *Redis) GetMany(ctx context.Context, keys ...string) ([]*Entry, error) {
	ctx, cancel := r.opCtx(ctx)
	defer cancel()
	vals, err := r.rdb.MGet(ctx, keys...).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("cache: redis mget: %w", err)
	}
	out := make([]*Entry, len(keys))
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if e, err := UnmarshalShared(keys[i], []byte(s)); err == nil {
			out[i] = e
		}
	}
	return out, nil
}
