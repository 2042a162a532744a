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
	set   func(Load)
	o     MirrorOptions
	// rev is the revision of the last load, loaded whether there was one;
	// only the goroutine calling Load and Run uses them.
	rev    Revision
	loaded bool
}

// Load is one full read of the store, as a Mirror hands it on.
type Load struct {
	// Rev is the revision read before the List: the load holds at least
	// every change up to it. A receiver that already applied a change of
	// the same epoch with a higher N can tell this load started before it.
	Rev Revision
	// Rewound: the store's revision went back within its epoch since the
	// previous load (a failover to a replica the latest changes had not
	// reached). The history every receiver holds was cut: this load
	// replaces it, however new the receiver's revision.
	Rewound bool
	Tenants []Tenant
}

// MirrorOptions configure a Mirror.
type MirrorOptions struct {
	// Interval is the full resync period. Default ResyncInterval.
	Interval time.Duration
	// Logger receives failed loads (at most one line per outage).
	Logger *slog.Logger
}

// NewMirror returns a mirror that hands every load of s to set, with the
// revision read before its List, so set can tell a load that started
// before a change it already applied from a newer one, and a store that
// lost its history (another epoch, or a Rewound load) from both. set is
// called from Run's goroutine only.
func NewMirror(s Store, set func(Load), o MirrorOptions) *Mirror {
	if o.Interval <= 0 {
		o.Interval = ResyncInterval
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &Mirror{store: s, set: set, o: o}
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
	rewound := m.loaded && rev.Epoch == m.rev.Epoch && rev.N < m.rev.N
	m.set(Load{Rev: rev, Rewound: rewound, Tenants: ts})
	m.rev, m.loaded = rev, true
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
	if !m.loaded {
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

// resync loads when the store's revision moved since the last load, or
// its epoch changed (the store lost its data: its revision may well be
// back at the one last loaded).
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
