package tenantstore

import (
	"context"
	"log/slog"
	"time"
)

// ResyncInterval is how often a Mirror re-reads the whole store, so a
// change notification lost on the way (a dropped pub/sub connection) is
// healed within it.
const ResyncInterval = 10 * time.Second

// Mirror keeps a copy of the store's tenants current for one instance:
// list once, then load again on every notification, and in full every
// Interval when the store's revision moved (client-go's informer, with
// Redis pub/sub as the watch).
type Mirror struct {
	store Store
	set   func(rev int64, ts []Tenant)
	o     MirrorOptions
	rev   int64 // the revision of the last load; only Run's goroutine uses it
}

// MirrorOptions configure a Mirror.
type MirrorOptions struct {
	// Interval is the full resync period. Default ResyncInterval.
	Interval time.Duration
	// Logger receives failed loads (at most one line per outage).
	Logger *slog.Logger
}

// NewMirror returns a mirror that hands every load of s to set, with the
// revision read before its List (the load holds at least every change up
// to it), so set can tell a load that started before a change it already
// applied from a newer one. set is called from Run's goroutine only.
func NewMirror(s Store, set func(rev int64, ts []Tenant), o MirrorOptions) *Mirror {
	if o.Interval <= 0 {
		o.Interval = ResyncInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mirror{store: s, set: set, o: o, rev: -1}
}

// Load lists the store and hands the result to set. It is what Run does
// first; cmd/gateway calls it once before serving, so the API tenants
// answer from the first request.
func (m *Mirror) Load(ctx context.Context) error {
	rev, err := m.store.Revision(ctx)
	if err != nil {
		return err
	}
	ts, err := m.store.List(ctx)
	if err != nil {
		return err
	}
	m.set(rev, ts)
	m.rev = rev
	return nil
}

// Run mirrors the store until ctx ends. A failed load keeps the last copy
// (authentication goes on with what it knew) and is retried at the next
// notification or tick.
func (m *Mirror) Run(ctx context.Context) {
	notes := m.store.Notifications(ctx)
	tick := time.NewTicker(m.o.Interval)
	defer tick.Stop()
	failing := false
	load := func(full bool) {
		var err error
		if full {
			err = m.Load(ctx)
		} else {
			err = m.resync(ctx)
		}
		switch {
		case err != nil && ctx.Err() == nil && !failing:
			failing = true
			m.o.Logger.Warn("api tenants: store unreachable; authenticating with the last copy", slog.String("error", err.Error()))
		case err == nil && failing:
			failing = false
			m.o.Logger.Info("api tenants: store reachable again")
		}
	}
	if m.rev < 0 {
		load(true)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-notes:
			load(true)
		case <-tick.C:
			load(false)
		}
	}
}

// resync loads when the store's revision moved since the last load.
func (m *Mirror) resync(ctx context.Context) error {
	rev, err := m.store.Revision(ctx)
	if err != nil {
		return err
	}
	if rev == m.rev {
		return nil
	}
	return m.Load(ctx)
}
