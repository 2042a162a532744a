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
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/sync/semaphore"

	"github.com/corralhq/corral/internal/spend"
)

// Tenant is one team behind the gateway and its policy.
type Tenant struct {
	// ID names the tenant in metrics, logs, the admin API and limits.
	ID string
	// Scope names the tenant's data: its cache entries and flights, the
	// objects it owns, its usage and its budget spend. It is ID for a
	// tenant of the tenants file (and an API tenant made before
	// generations), and ID "." generation for an API tenant, so a tenant
	// deleted and made again under the same id starts with none of the
	// old one's data, even what a call in flight across the delete stores
	// after the purge. "." is outside the id alphabet: no id and scope
	// collide.
	Scope string
	// Source says where the tenant is declared: SourceFile or SourceAPI.
	Source Source
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

// Source is where a tenant is declared.
type Source string

const (
	// SourceFile is a tenant of the tenants file (read-only to the admin API).
	SourceFile Source = "file"
	// SourceAPI is a tenant created through the admin API and kept in the
	// tenant store.
	SourceAPI Source = "api"
)

// Spec is what the registry needs to build a tenant; cmd/gateway fills it
// from the tenants file and from the tenant store.
type Spec struct {
	ID string
	// Source is where the tenant is declared; "" counts as SourceFile.
	Source    Source
	KeySHA256 []string // hex digests of keys without id or expiry (the file's)
	// Keys are keys with an id and an optional expiry (the admin API's).
	Keys []Key
	// Doc is the policy as a JSON object of tenants-file fields, as the
	// file or the admin API set it: what the admin API shows.
	Doc []byte
	// Generation tells apart API tenants made one after the other under
	// one id (see Tenant.Scope); "" for a tenant of the tenants file.
	Generation string
	// Policy is copied into the Tenant, normalised (see Tenant.Policy).
	Policy
}

// PolicyError is a policy field that does not validate; Field is its name
// in the tenants file (cache_ttl, models[2]).
type PolicyError struct {
	Field   string
	Problem string
}

func (e *PolicyError) Error() string {
	if e.Field == "" {
		return "tenant: policy: " + e.Problem
	}
	return "tenant: policy: " + e.Field + ": " + e.Problem
}

// Key is one key of an API tenant as the registry needs it: never the
// key itself, only its digest.
type Key struct {
	// ID names the key (key_...) for last-used tracking.
	ID string
	// SHA256 is the hex digest of the bearer key.
	SHA256 string
	// ExpiresAt, when not zero, is the instant the key stops working.
	ExpiresAt time.Time
}

// Registry maps key digests to tenants. It is immutable after New; a
// reload builds a new Registry and swaps it in.
type Registry struct {
	// byDigest is keyed by the SHA-256 of a bearer key.
	byDigest map[[sha256.Size]byte]keyEntry
	byID     map[string]*Tenant
	// specs are what the registry was built from, so With and rebuilds
	// can start again from them.
	specs []Spec
	// bySpec is each tenant's spec, to reuse an unchanged Tenant (and its
	// leader semaphore) across rebuilds.
	bySpec map[string]*Spec
	// used is each API key's last use, by key id (see Used).
	used map[string]keyUse
}

// NewRegistry builds a registry. Validation of ids and duplicates happens
// in config; NewRegistry still refuses malformed digests and duplicates so
// it is safe to call directly.
func NewRegistry(specs []Spec) (*Registry, error) { return rebuild(nil, specs) }

// With returns a registry of r's tenants plus extra; an extra tenant whose
// id r already has is left out (r's tenants win: the file's tenants over
// the store's) and its id returned in shadowed. Tenants whose spec did not
// change since prev (nil: none) keep their Tenant value, so a rebuild
// never resets the leader semaphore of a tenant it did not touch.
func (r *Registry) With(prev *Registry, extra []Spec) (_ *Registry, shadowed []string, err error) {
	specs := slices.Clip(slices.Clone(r.specs))
	for _, s := range extra {
		if _, taken := r.byID[s.ID]; taken {
			shadowed = append(shadowed, s.ID)
			continue
		}
		specs = append(specs, s)
	}
	out, err := rebuild(prev, specs)
	return out, shadowed, err
}

func rebuild(prev *Registry, specs []Spec) (*Registry, error) {
	digests, apiKeys := 0, 0
	for i := range specs {
		digests += len(specs[i].KeySHA256) + len(specs[i].Keys)
		apiKeys += len(specs[i].Keys)
	}
	r := &Registry{
		byDigest: make(map[[sha256.Size]byte]keyEntry, digests),
		byID:     make(map[string]*Tenant, len(specs)),
		specs:    specs,
		bySpec:   make(map[string]*Spec, len(specs)),
		used:     make(map[string]keyUse, apiKeys),
	}
	for i := range specs {
		s := &specs[i]
		if _, dup := r.byID[s.ID]; dup {
			return nil, fmt.Errorf("tenant: duplicate id %q", s.ID)
		}
		r.bySpec[s.ID] = s
		var t *Tenant
		if prev != nil {
			if ps, ok := prev.bySpec[s.ID]; ok && reflect.DeepEqual(ps, s) {
				t = prev.byID[s.ID]
			}
		}
		if t == nil {
			t = newTenant(s)
		}
		for _, h := range s.KeySHA256 {
			if err := r.addKey(t, h, nil, 0); err != nil {
				return nil, err
			}
		}
		for _, k := range s.Keys {
			u := prev.usedOf(k.ID)
			var exp int64
			if !k.ExpiresAt.IsZero() {
				exp = expiryNanos(k.ExpiresAt)
			}
			if err := r.addKey(t, k.SHA256, u, exp); err != nil {
				return nil, err
			}
			r.used[k.ID] = keyUse{tenant: s.ID, minute: u}
		}
		r.byID[s.ID] = t
	}
	return r, nil
}

func (r *Registry) usedOf(keyID string) *atomic.Int64 {
	if r != nil {
		if u, ok := r.used[keyID]; ok {
			return u.minute
		}
	}
	return new(atomic.Int64)
}

func (r *Registry) addKey(t *Tenant, hexDigest string, used *atomic.Int64, expires int64) error {
	raw, err := hex.DecodeString(hexDigest)
	if err != nil || len(raw) != sha256.Size {
		return fmt.Errorf("tenant %q: key digest is not 64 hex characters", t.ID)
	}
	d := [sha256.Size]byte(raw)
	if _, dup := r.byDigest[d]; dup {
		return fmt.Errorf("tenant %q: duplicate key digest", t.ID)
	}
	r.byDigest[d] = keyEntry{digest: d, tenant: t, used: used, expires: expires}
	return nil
}

// newTenant builds the Tenant of s with its policy normalised.
func newTenant(s *Spec) *Tenant {
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
	src := s.Source
	if src == "" {
		src = SourceFile
	}
	return &Tenant{ID: s.ID, Scope: ScopeOf(s.ID, s.Generation), Source: src, Policy: p, Leaders: semaphore.NewWeighted(int64(p.MaxLeaders))}
}

// Authenticate returns the tenant that owns key.
//
// The lookup is by the key's SHA-256 digest: timing can reveal at most
// something about a digest, and a digest gives no way back to a key, so an
// attacker learns nothing usable from response times. The final equality
// check is constant-time all the same.
//
// It is AuthenticateAt with the wall clock.
func (r *Registry) Authenticate(key string) (*Tenant, bool) {
	return r.AuthenticateAt(key, time.Now())
}

// AuthenticateAt is Authenticate at the instant now: a key whose expiry is
// at or before now is refused, so an expired key is 401 the second it
// expires, on every instance, with no store round trip. An API key's use
// is noted to the minute for Used.
func (r *Registry) AuthenticateAt(key string, now time.Time) (*Tenant, bool) {
	if key == "" {
		return nil, false
	}
	d := sha256.Sum256([]byte(key))
	e, ok := r.byDigest[d]
	if !ok || subtle.ConstantTimeCompare(e.digest[:], d[:]) != 1 {
		return nil, false
	}
	if e.expires != 0 && now.UnixNano() >= e.expires {
		return nil, false
	}
	if e.used != nil {
		if m := now.Unix() / 60; e.used.Load() < m {
			e.used.Store(m)
		}
	}
	return e.tenant, true
}

type keyEntry struct {
	digest [sha256.Size]byte
	tenant *Tenant
	// used holds the key's last use in Unix minutes (API keys only).
	used *atomic.Int64
	// expires is the expiry in Unix nanoseconds; 0 = never.
	expires int64
}

// keyUse is an API key's last use, in Unix minutes, and its tenant.
type keyUse struct {
	tenant string
	minute *atomic.Int64
}

// Use is an API key's last use (to the minute) and the tenant it belongs
// to, which lets the store refuse to record a use of a key revoked
// meanwhile.
type Use struct {
	Tenant string
	At     time.Time
}

// Used returns the last use, to the minute, of every API key used since
// the minute since (Unix minutes, exclusive), by key id.
func (r *Registry) Used(since int64) map[string]Use {
	out := make(map[string]Use)
	for id, u := range r.used {
		if m := u.minute.Load(); m > since {
			out[id] = Use{Tenant: u.tenant, At: time.Unix(m*60, 0).UTC()}
		}
	}
	return out
}

// Get returns the tenant with id.
func (r *Registry) Get(id string) (*Tenant, bool) {
	t, ok := r.byID[id]
	return t, ok
}

// Spec returns the spec tenant id was built from.
func (r *Registry) Spec(id string) (Spec, bool) {
	s, ok := r.bySpec[id]
	if !ok {
		return Spec{}, false
	}
	return *s, true
}

// IDs returns the tenants' ids, sorted.
func (r *Registry) IDs() []string {
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Len is the number of tenants.
func (r *Registry) Len() int { return len(r.byID) }

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

// lastNano is the last instant Unix nanoseconds hold (2262-04-11).
var lastNano = time.Unix(0, math.MaxInt64)

// expiryNanos is an expiry in Unix nanoseconds. One past 2262-04-11,
// which UnixNano would wrap to a date long gone, is held as the last
// instant they can write: no key outlives it by a day that matters.
func expiryNanos(at time.Time) int64 {
	if at.After(lastNano) {
		return math.MaxInt64
	}
	return at.UnixNano()
}

// ScopeSeparator joins a tenant's id and generation in its Scope.
const ScopeSeparator = "."

// ScopeOf is the Scope of the tenant id of generation gen ("": id).
func ScopeOf(id, gen string) string {
	if gen == "" {
		return id
	}
	return id + ScopeSeparator + gen
}

// IDOfScope is the tenant id of a Scope.
func IDOfScope(scope string) string {
	id, _, _ := strings.Cut(scope, ScopeSeparator)
	return id
}
