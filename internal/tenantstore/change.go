package tenantstore

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"time"
)

// Change is one admin change, applied by Store.Apply.
type Change interface {
	tenantID() string
	// apply returns the tenant after the change (nil: removed) and the
	// event's action and key id; prev is nil when the tenant is absent.
	// It must not keep prev's slices: a retry calls it again.
	apply(prev *Tenant, at time.Time) (*Tenant, Event, error)
}

// TenantCreated creates a tenant with a policy (a JSON object, already
// validated by the caller).
type TenantCreated struct {
	ID     string
	Policy json.RawMessage
}

// TenantUpdated applies a JSON merge patch (RFC 7396) to a tenant's
// policy. Check validates the merged policy; its error is returned
// wrapped in a CheckError, and nothing is written. The patch is applied
// to the latest version, so concurrent patches of different fields all
// land.
type TenantUpdated struct {
	ID    string
	Patch json.RawMessage
	Check func(policy json.RawMessage) error
}

// TenantDeleted removes a tenant and its keys.
type TenantDeleted struct{ ID string }

// KeyCreated adds a key (its digest, never the key) to a tenant.
type KeyCreated struct {
	Tenant string
	Key    Key
}

// KeyRevoked removes a key from a tenant.
type KeyRevoked struct {
	Tenant string
	KeyID  string
}

func (c TenantCreated) tenantID() string { return c.ID }
func (c TenantUpdated) tenantID() string { return c.ID }
func (c TenantDeleted) tenantID() string { return c.ID }
func (c KeyCreated) tenantID() string    { return c.Tenant }
func (c KeyRevoked) tenantID() string    { return c.Tenant }

func (c TenantCreated) apply(prev *Tenant, at time.Time) (*Tenant, Event, error) {
	if prev != nil {
		return nil, Event{}, ErrExists
	}
	p := c.Policy
	if len(p) == 0 {
		p = json.RawMessage("{}")
	}
	return &Tenant{ID: c.ID, Generation: newGeneration(), Policy: p, CreatedAt: at, Keys: []Key{}}, Event{Action: ActionTenantCreated}, nil
}

func (c TenantUpdated) apply(prev *Tenant, _ time.Time) (*Tenant, Event, error) {
	if prev == nil {
		return nil, Event{}, ErrNotFound
	}
	merged, err := MergePatch(prev.Policy, c.Patch)
	if err != nil {
		return nil, Event{}, &CheckError{err}
	}
	if c.Check != nil {
		if err := c.Check(merged); err != nil {
			return nil, Event{}, &CheckError{err}
		}
	}
	t := *prev
	t.Policy = merged
	return &t, Event{Action: ActionTenantUpdated}, nil
}

func (c TenantDeleted) apply(prev *Tenant, _ time.Time) (*Tenant, Event, error) {
	if prev == nil {
		return nil, Event{}, ErrNotFound
	}
	return nil, Event{Action: ActionTenantDeleted}, nil
}

func (c KeyCreated) apply(prev *Tenant, _ time.Time) (*Tenant, Event, error) {
	if prev == nil {
		return nil, Event{}, ErrNotFound
	}
	t := *prev
	t.Keys = append(slices.Clip(prev.Keys), c.Key)
	return &t, Event{Action: ActionKeyCreated, KeyID: c.Key.ID}, nil
}

func (c KeyRevoked) apply(prev *Tenant, _ time.Time) (*Tenant, Event, error) {
	if prev == nil {
		return nil, Event{}, ErrNotFound
	}
	i := slices.IndexFunc(prev.Keys, func(k Key) bool { return k.ID == c.KeyID })
	if i < 0 {
		return nil, Event{}, ErrKeyNotFound
	}
	t := *prev
	t.Keys = slices.Delete(slices.Clone(prev.Keys), i, i+1)
	return &t, Event{Action: ActionKeyRevoked, KeyID: c.KeyID}, nil
}

// MergePatch applies an RFC 7396 JSON merge patch to a JSON object: a
// member set to null is removed, an object is merged member by member, any
// other value replaces. The result is an object with its members sorted.
func MergePatch(doc, patch json.RawMessage) (json.RawMessage, error) {
	var d, p any
	if len(doc) > 0 {
		if err := decodeNumbers(doc, &d); err != nil {
			return nil, fmt.Errorf("tenantstore: policy: %w", err)
		}
	}
	if err := decodeNumbers(patch, &p); err != nil {
		return nil, fmt.Errorf("tenantstore: patch: %w", err)
	}
	out := mergeValue(d, p)
	if _, ok := out.(map[string]any); !ok {
		return nil, fmt.Errorf("tenantstore: patch: the result is not a JSON object")
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("tenantstore: patch: %w", err)
	}
	return b, nil
}

func mergeValue(doc, patch any) any {
	pm, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	dm, ok := doc.(map[string]any)
	if !ok {
		dm = map[string]any{}
	}
	out := make(map[string]any, len(dm)+len(pm))
	for k, v := range dm {
		out[k] = v
	}
	for k, v := range pm {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = mergeValue(out[k], v)
	}
	return out
}

func decodeNumbers(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	return dec.Decode(v)
}
