package console

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltFile is the embedded-mode file of signed-out sessions inside
// CORRAL_DATA_DIR, a file of its own next to objects.db and tenants.db.
const BoltFile = "sessions.db"

// boltRevoked maps a signed-out session id to its expiry (big-endian
// Unix seconds).
var boltRevoked = []byte("revoked")

// BoltRevocations keeps signed-out sessions in a bbolt file, for embedded
// mode: a gateway restarted on the same data directory still refuses a
// cookie that signed out before (in memory, the restart forgot it and the
// cookie worked again until its 12 hours were up). Each sign-out first
// deletes the entries whose sessions have expired, as RedisRevocations
// does, so the file holds only the last SessionTTL's sign-outs.
type BoltRevocations struct {
	db  *bolt.DB
	now func() time.Time
}

var _ Revocations = (*BoltRevocations)(nil)

// OpenBoltRevocations opens (creating when needed) dir/sessions.db on the
// clock now (nil: the wall clock), dropping the sessions that expired
// while no gateway ran. It fails after two seconds if another process
// holds the file.
func OpenBoltRevocations(dir string, now func() time.Time) (*BoltRevocations, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("console: data dir: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("console: open %s: %w (is another gateway using this CORRAL_DATA_DIR?)", path, err)
	}
	b := &BoltRevocations{db: db, now: now}
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(boltRevoked)
		if err != nil {
			return err
		}
		return b.dropExpired(bk)
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("console: init %s: %w", path, err)
	}
	return b, nil
}

// Close closes the file.
func (b *BoltRevocations) Close() error { return b.db.Close() }

// Revoke implements Revocations: the sign-out is on disk (fsynced) when
// it returns.
func (b *BoltRevocations) Revoke(_ context.Context, id string, until time.Time) error {
	var exp [8]byte
	binary.BigEndian.PutUint64(exp[:], uint64(until.Unix()))
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltRevoked)
		if err := b.dropExpired(bk); err != nil {
			return err
		}
		return bk.Put([]byte(id), exp[:])
	})
	if err != nil {
		return fmt.Errorf("console: revoke session: %w", err)
	}
	return nil
}

// Revoked implements Revocations.
func (b *BoltRevocations) Revoked(_ context.Context, id string) (bool, error) {
	var found bool
	err := b.db.View(func(tx *bolt.Tx) error {
		found = tx.Bucket(boltRevoked).Get([]byte(id)) != nil
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("console: read revoked sessions: %w", err)
	}
	return found, nil
}

// Len is the number of sign-outs held.
func (b *BoltRevocations) Len() int {
	var n int
	_ = b.db.View(func(tx *bolt.Tx) error {
		n = tx.Bucket(boltRevoked).Stats().KeyN
		return nil
	})
	return n
}

// dropExpired deletes the sign-outs of sessions that have expired: their
// cookies are refused by their expiry alone. At most one SessionTTL of
// sign-outs is scanned.
func (b *BoltRevocations) dropExpired(bk *bolt.Bucket) error {
	now := b.now().Unix()
	var gone [][]byte
	err := bk.ForEach(func(k, v []byte) error {
		if len(v) != 8 || int64(binary.BigEndian.Uint64(v)) <= now {
			gone = append(gone, append([]byte(nil), k...))
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, k := range gone {
		if err := bk.Delete(k); err != nil {
			return err
		}
	}
	return nil
}
