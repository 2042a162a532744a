package usage

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// BoltFile is the embedded usage file inside CORRAL_DATA_DIR.
const BoltFile = "usage.db"

var (
	totalsBucket = []byte("totals") // tenant → Counters (JSON)
	daysBucket   = []byte("days")   // "<day>\x00<tenant>\x00<model>" → ModelCounters (JSON)
)

// BoltOptions configure a Bolt recorder.
type BoltOptions struct {
	// Interval between writes of what changed. Default 1s.
	Interval time.Duration
	// Now names the UTC day of each count. Default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Bolt is embedded mode's usage recorder: the counters live in memory (a
// Memory, loaded from the file at start) and what changed is written to
// dir/usage.db every interval and on Close, so a restart keeps the
// totals and the chargeback rows (a crash loses at most one interval).
// Each write holds the changed tenants' and days' whole figures, so a
// failed write is made good by the next.
type Bolt struct {
	*Memory
	db   *bolt.DB
	opts BoltOptions
	path string

	mu        sync.Mutex // protects dirty and dirtyDays
	dirty     map[string]bool
	dirtyDays map[dayKey]bool

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// OpenBolt opens (creating when needed) dir/usage.db, loads it and starts
// its writer, which Close stops after a last write. It fails after two
// seconds if another process holds the file.
func OpenBolt(dir string, o BoltOptions) (*Bolt, error) {
	if o.Interval <= 0 {
		o.Interval = time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("usage: data dir: %w", err)
	}
	path := filepath.Join(dir, BoltFile)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 2 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("usage: open %s: %w (is another gateway using this CORRAL_DATA_DIR?)", path, err)
	}
	m := NewMemoryAt(o.Now)
	err = db.Update(func(tx *bolt.Tx) error {
		tb, err := tx.CreateBucketIfNotExists(totalsBucket)
		if err != nil {
			return err
		}
		db, err := tx.CreateBucketIfNotExists(daysBucket)
		if err != nil {
			return err
		}
		if err := tb.ForEach(func(k, v []byte) error {
			var c Counters
			if err := json.Unmarshal(v, &c); err != nil {
				return fmt.Errorf("tenant %q: %w", k, err)
			}
			m.m[string(k)] = &c
			return nil
		}); err != nil {
			return err
		}
		return db.ForEach(func(k, v []byte) error {
			day, rest, _ := strings.Cut(string(k), "\x00")
			tenant, model, ok := strings.Cut(rest, "\x00")
			if !ok {
				return nil
			}
			var mc ModelCounters
			if err := json.Unmarshal(v, &mc); err != nil {
				return fmt.Errorf("day %q: %w", k, err)
			}
			m.days[dayKey{tenant, day, model}] = mc
			return nil
		})
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("usage: load %s: %w", path, err)
	}
	b := &Bolt{Memory: m, db: db, opts: o, path: path, dirty: map[string]bool{}, dirtyDays: map[dayKey]bool{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b, nil
}

// Add adds c to tenant's counters; the file has them within an interval.
func (b *Bolt) Add(tenant string, c Counters) {
	day := Day(b.opts.Now())
	b.addOn(tenant, day, c)
	b.mu.Lock()
	b.dirty[tenant] = true
	for model := range c.ByModel {
		b.dirtyDays[dayKey{tenant, day, model}] = true
	}
	b.mu.Unlock()
}

// Write writes what changed since the last write now; on failure it is
// kept for the next.
func (b *Bolt) Write() error {
	b.mu.Lock()
	dirty, dirtyDays := b.dirty, b.dirtyDays
	b.dirty, b.dirtyDays = map[string]bool{}, map[dayKey]bool{}
	b.mu.Unlock()
	oldest := Day(b.opts.Now().AddDate(0, 0, -RetentionDays+1))
	type put struct{ k, v []byte }
	var totals, days []put
	b.Memory.mu.Lock()
	for t := range dirty {
		if c := b.Memory.m[t]; c != nil {
			enc, _ := json.Marshal(c)
			totals = append(totals, put{[]byte(t), enc})
		}
	}
	for k := range dirtyDays {
		if mc, ok := b.Memory.days[k]; ok {
			enc, _ := json.Marshal(mc)
			days = append(days, put{[]byte(k.day + "\x00" + k.tenant + "\x00" + k.model), enc})
		}
	}
	b.Memory.mu.Unlock()
	err := b.db.Update(func(tx *bolt.Tx) error {
		tb, db := tx.Bucket(totalsBucket), tx.Bucket(daysBucket)
		for _, p := range totals {
			if err := tb.Put(p.k, p.v); err != nil {
				return err
			}
		}
		for _, p := range days {
			if err := db.Put(p.k, p.v); err != nil {
				return err
			}
		}
		// Retention: the days are keyed by day first, so the aged-out
		// ones are the first keys.
		c := db.Cursor()
		for k, _ := c.First(); k != nil && string(k) < oldest; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		b.mu.Lock()
		for t := range dirty {
			b.dirty[t] = true
		}
		for k := range dirtyDays {
			b.dirtyDays[k] = true
		}
		b.mu.Unlock()
		return fmt.Errorf("usage: write %s: %w", b.path, err)
	}
	return nil
}

func (b *Bolt) loop() {
	defer close(b.done)
	t := time.NewTicker(b.opts.Interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-b.stop:
			if err := b.Write(); err != nil {
				b.opts.Logger.Warn("usage counters not written to the data dir at shutdown", slog.String("error", err.Error()))
			}
			return
		case <-t.C:
			err := b.Write()
			if err != nil && !failing {
				b.opts.Logger.Warn("usage counters not written to the data dir; keeping them in memory", slog.String("error", err.Error()))
			}
			failing = err != nil
		}
	}
}

// Close stops the writer after a last write and closes the file.
func (b *Bolt) Close() error {
	b.once.Do(func() { close(b.stop) })
	<-b.done
	return b.db.Close()
}
