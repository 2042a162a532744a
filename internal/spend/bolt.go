package spend

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltFile is the embedded ledger's file inside CORRAL_DATA_DIR.
const BoltFile = "spend.db"

var spendBucket = []byte("spend")

// boltRow is one tenant's record in spend.db: its current periods' figures
// (the in-process store's row) and the reservations it holds.
type boltRow struct {
	Row  map[string]int64           `json:"row"`
	Held map[string]heldReservation `json:"held,omitempty"`
}

// OpenBoltLedger is the embedded-mode ledger kept in dir/spend.db, so a
// restart neither re-grants a day's or month's budget nor forgets the
// reservations of calls that were running (they expire after their hold
// as they would have). Every change is written (and fsynced) before the
// script's answer returns: one write per reservation and per settle, that
// is per upstream call. A failed write is logged and made good by the
// tenant's next one (each write holds the tenant's whole record). It
// fails after two seconds if another process holds the file; close
// closes it.
func OpenBoltLedger(dir string, o LedgerOptions, log *slog.Logger) (l *Ledger, close func() error, err error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("spend: data dir: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, nil, fmt.Errorf("spend: open %s: %w (is another gateway using this CORRAL_DATA_DIR?)", path, err)
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &memStore{now: now, hold: holdOf(o), rows: map[string]map[string]int64{}, held: map[string]heldReservation{}}
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(spendBucket)
		if err != nil {
			return err
		}
		return bk.ForEach(func(k, v []byte) error {
			var r boltRow
			if err := json.Unmarshal(v, &r); err != nil {
				return fmt.Errorf("tenant %q: %w", k, err)
			}
			if r.Row == nil {
				r.Row = map[string]int64{}
			}
			s.rows[string(k)] = r.Row
			for id, x := range r.Held {
				x.Tenant = string(k)
				s.held[id] = x
			}
			return nil
		})
	})
	if err != nil {
		_ = db.Close()
		return nil, nil, fmt.Errorf("spend: load %s: %w", path, err)
	}
	s.save = func(tenant string, row map[string]int64, held map[string]heldReservation) {
		enc, err := json.Marshal(boltRow{Row: row, Held: held})
		if err == nil {
			err = db.Update(func(tx *bolt.Tx) error { return tx.Bucket(spendBucket).Put([]byte(tenant), enc) })
		}
		if err != nil {
			log.Warn("spend not written to the data dir; kept in memory and written with the tenant's next change",
				slog.String("path", path), slog.String("error", err.Error()))
		}
	}
	l = newLedger(s, now, o.Instance)
	// Each instance's view starts from what the file holds, so the
	// remaining budget on the first answers after a restart is the truth.
	for tenant := range s.rows {
		if res, err := s.eval(context.Background(), tenant, "read"); err == nil {
			l.remember(tenant, res.settled())
		}
	}
	return l, db.Close, nil
}
