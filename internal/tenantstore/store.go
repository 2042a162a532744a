package tenantstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// AuditKept is how many audit events the store keeps, newest first.
const AuditKept = 10_000

// Tenant is one API tenant as the store keeps it.
type Tenant struct {
	ID string `json:"id"`
	// Policy is a JSON object of tenants-file policy fields
	// (requests_per_minute, cache_ttl, ...), as the operator set them; the
	// store does not interpret it, so a new policy field needs no change
	// here.
	Policy json.RawMessage `json:"policy"`
	// Generation is a random id given at creation, so a tenant made again
	// under a deleted one's id keeps its data apart (tenant.Spec's
	// Generation). Empty for tenants stored before it existed.
	Generation string `json:"generation,omitempty"`
	// Version counts the tenant's changes, from 1 at creation.
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	Keys      []Key     `json:"keys"`
}

// Key is one key of a tenant: never the key itself.
type Key struct {
	// ID is "key_" and 24 hex digits.
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// SHA256 is the hex digest of the key, what authentication compares.
	SHA256 string `json:"sha256"`
	// Prefix is the key's first 12 characters (tenant.ShownPrefix), so
	// people can tell keys apart without the key.
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// Action names what an audit event records.
type Action string

// The actions of the audit trail, one per Change.
const (
	ActionTenantCreated Action = "tenant.created"
	ActionTenantUpdated Action = "tenant.updated"
	ActionTenantDeleted Action = "tenant.deleted"
	ActionKeyCreated    Action = "key.created"
	ActionKeyRevoked    Action = "key.revoked"
)

// Event is one entry of the audit trail.
type Event struct {
	Time   time.Time `json:"time"`
	Action Action    `json:"action"`
	Tenant string    `json:"tenant"`
	KeyID  string    `json:"key_id,omitempty"`
	// Remote is the address the change came from.
	Remote string `json:"remote_addr"`
	// Revision is the store's revision this change made (Store.Revision
	// after it): what orders it against a Mirror's loads. Not audited.
	Revision Revision `json:"-"`
}

// Revision is a point in a store's history. N counts the changes applied;
// Epoch names the history they belong to: a random id the store writes
// once and writes anew when it finds it missing, so a store that lost its
// data (a FLUSHALL, a Redis restarted without persistence) starts a new
// epoch rather than counting again from 1 under the old name. Two
// revisions are ordered by N only within one epoch: a revision of another
// epoch says nothing about what the store holds, and whoever compares must
// reload in full rather than drop the load as older.
type Revision struct {
	Epoch string
	N     int64
}

// newEpoch is a fresh epoch id: 16 random bytes in hex.
func newEpoch() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(b[:])
}

// newGeneration is a fresh tenant generation: 6 random bytes in hex, so
// two tenants made under one id share one with odds of 1 in 2^48.
func newGeneration() string { return newEpoch()[:12] }

// Meta is who made a change and when.
type Meta struct {
	Time   time.Time
	Remote string
}

// Errors Apply returns that callers branch on. Any other error from a
// store is the store being unreachable or failing: nothing was written.
var (
	// ErrExists: TenantCreated for an id the store already has.
	ErrExists = errors.New("tenantstore: tenant exists")
	// ErrNotFound: a change or Get for a tenant the store does not have.
	ErrNotFound = errors.New("tenantstore: no such tenant")
	// ErrKeyNotFound: KeyRevoked for a key the tenant does not have.
	ErrKeyNotFound = errors.New("tenantstore: no such key")
	// ErrContended: the tenant changed under every attempt (a change
	// storm); nothing was written and a retry may succeed.
	ErrContended = errors.New("tenantstore: tenant changed concurrently too often")
)

// Store keeps API tenants, their keys and the audit trail.
type Store interface {
	// List returns every tenant, sorted by id.
	List(ctx context.Context) ([]Tenant, error)
	// Get returns one tenant, or ErrNotFound.
	Get(ctx context.Context, id string) (Tenant, error)
	// Apply applies c to the latest version of its tenant, records its
	// audit event and notifies every Notifications channel, all or
	// nothing. It returns the tenant after the change (the removed one
	// for TenantDeleted) and the event.
	Apply(ctx context.Context, c Change, m Meta) (Tenant, Event, error)
	// Audit returns up to limit events, newest first.
	Audit(ctx context.Context, limit int) ([]Event, error)
	// Revision changes with every applied change, so a resync that finds
	// it unchanged can skip the List.
	Revision(ctx context.Context) (Revision, error)
	// Notifications sends (coalesced, never blocking the sender) after a
	// change was applied anywhere, until ctx ends.
	Notifications(ctx context.Context) <-chan struct{}
	// Touch records keys' last use (key id → its tenant and time, to the
	// minute), except for keys their tenant no longer holds: a revoked
	// key's entry, removed with it, stays removed. A use older than the
	// one recorded is not written, so a key's last use never goes back
	// whatever order instances write theirs in.
	Touch(ctx context.Context, used map[string]Use) error
	// LastUsed returns the recorded last use of the keys with these ids.
	LastUsed(ctx context.Context, keyIDs []string) (map[string]time.Time, error)
}

// apply runs c against the stored form of its tenant (nil when absent)
// and returns the new stored form (nil: remove) and the event.
func apply(c Change, cur []byte, m Meta) (next []byte, t Tenant, ev Event, gone []string, err error) {
	var prev *Tenant
	if cur != nil {
		prev = new(Tenant)
		if err := json.Unmarshal(cur, prev); err != nil {
			return nil, Tenant{}, Event{}, nil, fmt.Errorf("tenantstore: decode %q: %w", c.tenantID(), err)
		}
	}
	at := m.Time.UTC()
	after, ev, err := c.apply(prev, at)
	if err != nil {
		return nil, Tenant{}, Event{}, nil, err
	}
	ev.Time, ev.Remote, ev.Tenant = at, m.Remote, c.tenantID()
	gone = removedKeys(prev, after)
	if after == nil { // removed
		return nil, *prev, ev, gone, nil
	}
	after.UpdatedAt = at
	after.Version++
	next, err = json.Marshal(after)
	if err != nil {
		return nil, Tenant{}, Event{}, nil, fmt.Errorf("tenantstore: encode %q: %w", c.tenantID(), err)
	}
	return next, *after, ev, gone, nil
}

// Use is a key's last use and the tenant that holds it.
type Use struct {
	Tenant string
	At     time.Time
}

// removedKeys lists the ids of prev's keys that after (nil: the tenant
// removed) no longer holds, whose last-use entries go with them.
func removedKeys(prev, after *Tenant) []string {
	if prev == nil {
		return nil
	}
	var gone []string
	for _, k := range prev.Keys {
		if after == nil || !slices.ContainsFunc(after.Keys, func(a Key) bool { return a.ID == k.ID }) {
			gone = append(gone, k.ID)
		}
	}
	return gone
}

// holdsKey reports whether the stored tenant record rec holds the key
// with id keyID.
func holdsKey(rec []byte, keyID string) bool {
	var t Tenant
	if rec == nil || json.Unmarshal(rec, &t) != nil {
		return false
	}
	return slices.ContainsFunc(t.Keys, func(k Key) bool { return k.ID == keyID })
}

// maxAttempts bounds Apply's optimistic retries: each conflict means
// another change was applied, so the loop always makes progress overall.
const maxAttempts = 100

// isTyped reports whether err is one of the errors callers branch on, or
// a caller's own validation error from TenantUpdated.Check (returned as
// is).
func isTyped(err error) bool {
	var ce *CheckError
	return errors.Is(err, ErrExists) || errors.Is(err, ErrNotFound) || errors.Is(err, ErrKeyNotFound) || errors.As(err, &ce)
}

// CheckError wraps the error of TenantUpdated.Check (or a bad patch), so
// callers tell a refused policy from a failing store.
type CheckError struct{ Err error }

func (e *CheckError) Error() string { return e.Err.Error() }
func (e *CheckError) Unwrap() error { return e.Err }
