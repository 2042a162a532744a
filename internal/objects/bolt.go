package objects

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Bolt is the embedded-mode Store: a bbolt file under CORRAL_DATA_DIR.
//
// bbolt was chosen over a pure-Go SQLite because ownership is a plain
// key → record map with point reads: bbolt is a small, pure-Go, widely
// used B+tree file (etcd's) with ACID transactions, fsync on commit and
// no query layer or CGO to carry. Its file lock also stops two embedded
// gateways from sharing one data directory by mistake.
type Bolt struct {
	db *bolt.DB
}

var _ Store = (*Bolt)(nil)

var ownersBucket = []byte("owners")

// BoltFile is the file name inside the data directory.
const BoltFile = "objects.db"

// OpenBolt opens (creating when needed) dir/objects.db. It fails after
// two seconds if another process holds the file.
func OpenBolt(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("objects: data dir: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("objects: open %s: %w (is another gateway using this CORRAL_DATA_DIR?)", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		_, err := tx.CreateBucketIfNotExists(ownersBucket)
		return err
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("objects: init %s: %w", path, err)
	}
	return &Bolt{db: db}, nil
}

// Close closes the file.
func (b *Bolt) Close() error { return b.db.Close() }

// Claim implements Store.
func (b *Bolt) Claim(_ context.Context, id string, o Owner) (Owner, error) {
	enc, err := encodeOwner(o)
	if err != nil {
		return Owner{}, err
	}
	got := o
	err = b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(ownersBucket)
		if prev := bk.Get([]byte(id)); prev != nil {
			p, err := decodeOwner(prev)
			if err != nil {
				return err
			}
			got = *p
			return nil
		}
		return bk.Put([]byte(id), enc)
	})
	if err != nil {
		return Owner{}, fmt.Errorf("objects: claim: %w", err)
	}
	return got, nil
}

// Get implements Store.
func (b *Bolt) Get(_ context.Context, ids []string) ([]*Owner, error) {
	out := make([]*Owner, len(ids))
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(ownersBucket)
		for i, id := range ids {
			v := bk.Get([]byte(id))
			if v == nil {
				continue
			}
			o, err := decodeOwner(v) // decodes a copy: v is valid only inside the transaction
			if err != nil {
				return err
			}
			out[i] = o
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("objects: get: %w", err)
	}
	return out, nil
}

// Set implements Store.
func (b *Bolt) Set(_ context.Context, id string, o Owner) error {
	enc, err := encodeOwner(o)
	if err != nil {
		return err
	}
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(ownersBucket).Put([]byte(id), enc) }); err != nil {
		return fmt.Errorf("objects: set: %w", err)
	}
	return nil
}

// Delete implements Store.
func (b *Bolt) Delete(_ context.Context, id string) error {
	if err := b.db.Update(func(tx *bolt.Tx) error { return tx.Bucket(ownersBucket).Delete([]byte(id)) }); err != nil {
		return fmt.Errorf("objects: delete: %w", err)
	}
	return nil
}
