// Package tenant holds Corral's tenants: who a bearer key belongs to, what
// that tenant may do, and the per-tenant leader semaphore that bounds its
// concurrent upstream calls on this instance.
//
// Keys are never held in clear: the registry knows only their SHA-256
// digests, and a presented key is hashed and then compared in constant
// time, so neither the tenants file nor a heap dump reveals a usable key.
package tenant

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/corralhq/corral/internal/spend"
)

// Tenant is one team behind the gateway and its policy.
type Tenant struct {
	// ID names the tenant in keys, metrics and logs.
	ID string
	// Policy is what the tenant may do, normalised by NewRegistry: Models
	// sorted and deduplicated, MaxLeaders at least 1, stale windows not
	// negative.
	Policy

	// Leaders is the per-instance leader semaphore (MaxLeaders permits).
	Leaders *semaphore.Weighted
}

// Policy is a tenant's limits and cache settings. Spec carries it in as the
// tenants file declares it, and Tenant carries it out as the registry
// normalised it, so the two cannot drift apart field by field.
type Policy struct {
	// RequestsPerMinute and TokensPerMinute are limits; 0 = unlimited.
	RequestsPerMinute int
	TokensPerMinute   int
	// MaxLeaders bounds concurrent upstream calls on this instance.
	MaxLeaders int
	// Models is the allow-list (sorted on a Tenant); nil allows every model.
	Models []string
	// CacheTTL is the positive TTL for this tenant's entries.
	CacheTTL time.Duration
	// NegativeTTL is the negative TTL for this tenant's failures.
	NegativeTTL time.Duration
	// StaleWhileRevalidate is how long past its TTL an entry is served at
	// once while one background call refreshes it; 0 = off.
	StaleWhileRevalidate time.Duration
	// StaleIfError is how long past its TTL an entry is served when the
	// upstream call fails transiently; 0 = off.
	StaleIfError time.Duration
	// Cache false means never cache or coalesce this tenant's requests.
	Cache bool
	// DenyObjects refuses every request that reads, lists, changes or
	// creates a stored object (stored_objects: deny).
	DenyObjects bool
	// Budget caps the tenant's upstream spend per UTC day and month; zero
	// = none. A budgeted tenant may call only priced models.
	Budget spend.Limits
	// AllowUnmetered lets a budgeted tenant make proxied POSTs Corral
	// cannot price (unmetered_endpoints: allow).
	AllowUnmetered bool
}

// Allows reports whether the tenant may use model.
func (t *Tenant) Allows(model string) bool {
	if t.Models == nil {
		return true
	}
	_, ok := slices.BinarySearch(t.Models, model)
	return ok
}

// Spec is what the registry needs to build a tenant; cmd/gateway fills it
// from the tenants file.
type Spec struct {
	ID        string
	KeySHA256 []string // hex digests
	// Policy is copied into the Tenant, normalised (see Tenant.Policy).
	Policy
}

// Registry maps key digests to tenants. It is immutable after New; a
// reload builds a new Registry and swaps it in.
type Registry struct {
	// byDigest is keyed by the SHA-256 of a bearer key.
	byDigest map[[sha256.Size]byte]keyEntry
	byID     map[string]*Tenant
}

// NewRegistry builds a registry. Validation of ids and duplicates happens
// in config; NewRegistry still refuses malformed digests and duplicates so
// it is safe to call directly.
func NewRegistry(specs []Spec) (*Registry, error) {
	r := &Registry{
		byDigest: make(map[[sha256.Size]byte]keyEntry),
		byID:     make(map[string]*Tenant, len(specs)),
	}
	for _, s := range specs {
		if _, dup := r.byID[s.ID]; dup {
			return nil, fmt.Errorf("tenant: duplicate id %q", s.ID)
		}
		p := s.Policy
		p.MaxLeaders = max(p.MaxLeaders, 1)
		p.StaleWhileRevalidate = max(p.StaleWhileRevalidate, 0)
		p.StaleIfError = max(p.StaleIfError, 0)
		if p.Models != nil {
			// Clone, not Sorted(Values(...)): an empty allow-list must stay
			// non-nil, since nil allows every model.
			p.Models = slices.Clone(p.Models)
			slices.Sort(p.Models)
			p.Models = slices.Compact(p.Models)
		}
		t := &Tenant{ID: s.ID, Policy: p, Leaders: semaphore.NewWeighted(int64(p.MaxLeaders))}
		for _, h := range s.KeySHA256 {
			raw, err := hex.DecodeString(h)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("tenant %q: key digest is not 64 hex characters", s.ID)
			}
			d := [sha256.Size]byte(raw)
			if _, dup := r.byDigest[d]; dup {
				return nil, fmt.Errorf("tenant %q: duplicate key digest", s.ID)
			}
			r.byDigest[d] = keyEntry{digest: d, tenant: t}
		}
		r.byID[s.ID] = t
	}
	return r, nil
}

// Authenticate returns the tenant that owns key.
//
// The lookup is by the key's SHA-256 digest: timing can reveal at most
// something about a digest, and a digest gives no way back to a key, so an
// attacker learns nothing usable from response times. The final equality
// check is constant-time all the same.
func (r *Registry) Authenticate(key string) (*Tenant, bool) {
	if key == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(key))
	e, ok := r.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return nil, false
	}
	return e.tenant, true
}

type keyEntry struct {
	digest [sha256.Size]byte
	tenant *Tenant
}

// Get returns the tenant with id.
func (r *Registry) Get(id string) (*Tenant, bool) {
	t, ok := r.byID[id]
	return t, ok
}

// Len is the number of tenants.
func (r *Registry) Len() int { return len(r.byID) }

// IDs returns every tenant's id, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// HashKey returns the hex SHA-256 of a key, as the tenants file stores it.
func HashKey(key string) string {
	d := sha256.Sum256([]byte(key))
	return hex.EncodeToString(d[:])
}

type ctxKey struct{}

// NewContext returns ctx carrying t.
func NewContext(ctx context.Context, t *Tenant) context.Context {
	return context.WithValue(ctx, ctxKey{}, t)
}

// FromContext returns the tenant in ctx, if any.
func FromContext(ctx context.Context) (*Tenant, bool) {
	t, ok := ctx.Value(ctxKey{}).(*Tenant)
	return t, ok && t != nil
}
