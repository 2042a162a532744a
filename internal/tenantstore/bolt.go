package tenantstore

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltFile is the embedded store's file name inside CORRAL_DATA_DIR. It is
// a file of its own, next to objects.db, with its own lock: two gateways
// on one data directory are refused by either file.
const BoltFile = "tenants.db"

var (
	boltTenants = []byte("tenants") // id → tenant record
	boltAudit   = []byte("audit")   // big-endian sequence → event
	boltUsed    = []byte("used")    // key id → last use (Unix s)
	boltMeta    = []byte("meta")    // "rev" → revision, "epoch" → epoch
	boltRev     = []byte("rev")
	boltEpoch   = []byte("epoch")
)

// Bolt is the embedded Store: a bbolt file, one process.
type Bolt struct {
	db *bolt.DB
	// epoch is the file's Revision.Epoch, written when the file was made.
	epoch string

	mu   sync.Mutex // protects subs
	subs map[chan struct{}]struct{}
}

var _ Store = (*Bolt)(nil)

// OpenBolt opens (creating when needed) dir/tenants.db. It fails after
// two seconds if another process holds the file.
func OpenBolt(dir string) (*Bolt, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("tenantstore: data dir: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("tenantstore: open %s: %w (is another gateway using this CORRAL_DATA_DIR?)", path, err)
	}
	var epoch string
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{boltTenants, boltAudit, boltUsed, boltMeta} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		mb := tx.Bucket(boltMeta)
		if e := mb.Get(boltEpoch); e != nil {
			epoch = string(e)
			return nil
		}
		epoch = newEpoch()
		return mb.Put(boltEpoch, []byte(epoch))
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("tenantstore: init %s: %w", path, err)
	}
	return &Bolt{db: db, epoch: epoch, subs: make(map[chan struct{}]struct{})}, nil
}

// Close closes the file.
func (b *Bolt) Close() error { return b.db.Close() }

// List implements Store.
func (b *Bolt) List(context.Context) ([]Tenant, error) {
	var out []Tenant
	err := b.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(boltTenants).ForEach(func(k, v []byte) error {
			var t Tenant
			if err := json.Unmarshal(v, &t); err != nil {
				return fmt.Errorf("decode %q: %w", k, err)
			}
			out = append(out, t)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("tenantstore: list: %w", err)
	}
	if out == nil {
		out = []Tenant{}
	}
	return out, nil // bbolt iterates in key order: sorted by id
}

// Get implements Store.
func (b *Bolt) Get(_ context.Context, id string) (Tenant, error) {
	var t Tenant
	found := false
	err := b.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(boltTenants).Get([]byte(id))
		if v == nil {
			return nil
		}
		found = true
		return json.Unmarshal(v, &t)
	})
	if err != nil {
		return Tenant{}, fmt.Errorf("tenantstore: get: %w", err)
	}
	if !found {
		return Tenant{}, ErrNotFound
	}
	return t, nil
}

// Apply implements Store in one bbolt transaction.
func (b *Bolt) Apply(_ context.Context, c Change, m Meta) (Tenant, Event, error) {
	var (
		t  Tenant
		ev Event
	)
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltTenants)
		id := []byte(c.tenantID())
		var cur []byte
		if v := bk.Get(id); v != nil {
			cur = append([]byte(nil), v...)
		}
		next, nt, nev, gone, err := apply(c, cur, m)
		if err != nil {
			return err
		}
		t, ev = nt, nev
		ub := tx.Bucket(boltUsed)
		for _, kid := range gone {
			if err := ub.Delete([]byte(kid)); err != nil {
				return err
			}
		}
		if next == nil {
			err = bk.Delete(id)
		} else {
			err = bk.Put(id, next)
		}
		if err != nil {
			return err
		}
		evJSON, err := json.Marshal(ev)
		if err != nil {
			return err
		}
		ab := tx.Bucket(boltAudit)
		seq, err := ab.NextSequence()
		if err != nil {
			return err
		}
		if err := ab.Put(seqKey(seq), evJSON); err != nil {
			return err
		}
		if seq > AuditKept {
			if err := ab.Delete(seqKey(seq - AuditKept)); err != nil {
				return err
			}
		}
		mb := tx.Bucket(boltMeta)
		rev, _ := strconv.ParseInt(string(mb.Get(boltRev)), 10, 64)
		ev.Revision = Revision{Epoch: b.epoch, N: rev + 1}
		return mb.Put(boltRev, []byte(strconv.FormatInt(ev.Revision.N, 10)))
	})
	if err != nil {
		if isTyped(err) {
			return Tenant{}, Event{}, err
		}
		return Tenant{}, Event{}, fmt.Errorf("tenantstore: apply: %w", err)
	}
	b.notify()
	return t, ev, nil
}

func seqKey(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Audit implements Store.
func (b *Bolt) Audit(_ context.Context, limit int) ([]Event, error) {
	out := []Event{}
	err := b.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(boltAudit).Cursor()
		for k, v := cur.Last(); k != nil && len(out) < min(limit, AuditKept); k, v = cur.Prev() {
			var e Event
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tenantstore: audit: %w", err)
	}
	return out, nil
}

// Revision implements Store.
func (b *Bolt) Revision(context.Context) (Revision, error) {
	rev := Revision{Epoch: b.epoch}
	err := b.db.View(func(tx *bolt.Tx) error {
		rev.N, _ = strconv.ParseInt(string(tx.Bucket(boltMeta).Get(boltRev)), 10, 64)
		return nil
	})
	if err != nil {
		return Revision{}, fmt.Errorf("tenantstore: revision: %w", err)
	}
	return rev, nil
}

// Notifications implements Store: one process holds the file, so the
// changes to hear of are this process's own.
func (b *Bolt) Notifications(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	b.mu.Lock()
	b.subs[ch] = struct{}{}
	b.mu.Unlock()
	context.AfterFunc(ctx, func() {
		b.mu.Lock()
		delete(b.subs, ch)
		b.mu.Unlock()
	})
	return ch
}

func (b *Bolt) notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ch := range b.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Touch implements Store; keys their tenant no longer holds are skipped,
// and a use older than the recorded one is not written.
func (b *Bolt) Touch(_ context.Context, used map[string]Use) error {
	if len(used) == 0 {
		return nil
	}
	err := b.db.Update(func(tx *bolt.Tx) error {
		bk, tb := tx.Bucket(boltUsed), tx.Bucket(boltTenants)
		for id, u := range used {
			if !holdsKey(tb.Get([]byte(u.Tenant)), id) {
				continue
			}
			// A key's last use never goes back (Redis's touch.lua).
			if prev, err := strconv.ParseInt(string(bk.Get([]byte(id))), 10, 64); err == nil && prev >= u.At.Unix() {
				continue
			}
			if err := bk.Put([]byte(id), []byte(strconv.FormatInt(u.At.Unix(), 10))); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("tenantstore: touch: %w", err)
	}
	return nil
}

// LastUsed implements Store.
func (b *Bolt) LastUsed(_ context.Context, keyIDs []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(keyIDs))
	err := b.db.View(func(tx *bolt.Tx) error {
		bk := tx.Bucket(boltUsed)
		for _, id := range keyIDs {
			if n, err := strconv.ParseInt(string(bk.Get([]byte(id))), 10, 64); err == nil {
				out[id] = time.Unix(n, 0).UTC()
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("tenantstore: last used: %w", err)
	}
	return out, nil
}
