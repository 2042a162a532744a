package cache

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
)

// Store is what the gateway needs from a cache backend. Keys are opaque.
type Store interface {
	// Get returns the entry stored under key, or an error matching
	// ErrNotFound when it is absent, expired or (Redis) corrupt.
	Get(ctx context.Context, key string) (*Entry, error)
	// Set stores e under key for ttl. It returns ErrNotCacheable for a nil
	// entry, an empty body or ttl <= 0.
	Set(ctx context.Context, key string, e *Entry, ttl time.Duration) error
	// Delete removes keys; absent keys are not an error.
	Delete(ctx context.Context, keys ...string) error
}

// PatternDeleter is implemented by both stores for the admin purge.
type PatternDeleter interface {
	// DeletePattern removes every key matching the Redis glob pattern
	// (see https://redis.io/docs/latest/commands/keys/) and returns how many
	// it removed. The empty pattern is refused with ErrEmptyPattern: go-redis
	// would send SCAN without MATCH for it and remove every key; say "*" to
	// mean everything.
	DeletePattern(ctx context.Context, pattern string) (int, error)
}

var (
	// ErrNotFound means the key holds no usable entry: absent, expired, or
	// corrupt.
	ErrNotFound = errors.New("cache: not found")
	// ErrCorrupt means a stored value did not decode. Errors from Get that
	// match it also match ErrNotFound; see the package doc.
	ErrCorrupt = errors.New("cache: corrupt entry")
	// ErrEmptyPattern is DeletePattern's answer to the empty pattern.
	ErrEmptyPattern = errors.New("cache: empty delete pattern")
	// ErrNotCacheable means Set refused the entry; see entry.ErrNotCacheable.
	ErrNotCacheable = entry.ErrNotCacheable
)

// checkCacheable validates Set's arguments for both stores.
func checkCacheable(e *Entry, ttl time.Duration) error {
	switch {
	case e == nil:
		return fmt.Errorf("%w: nil entry", ErrNotCacheable)
	case len(e.Body) == 0:
		return fmt.Errorf("%w: empty body", ErrNotCacheable)
	case ttl <= 0:
		return fmt.Errorf("%w: ttl %v <= 0", ErrNotCacheable, ttl)
	}
	return nil
}

// stamped returns a shallow copy of e with StoredAt and TTL filled in when
// the caller left them zero. Body and Header are shared, not copied.
func stamped(e *Entry, now func() time.Time, ttl time.Duration) *Entry {
	cp := *e
	if cp.StoredAt.IsZero() {
		cp.StoredAt = now()
	}
	if cp.TTL == 0 {
		cp.TTL = ttl
	}
	return &cp
}
