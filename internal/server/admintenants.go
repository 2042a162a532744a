package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
)

// adminBodyLimit bounds the body of every admin change: a policy or a key
// request is a few hundred bytes.
const adminBodyLimit = 64 << 10

// tenantSources are the two halves of the running registry: the tenants
// file's (swapped by reload) and the tenant store's (swapped by its
// Mirror and by this instance's own changes). The merged registry is
// s.tenants, which the request path reads without a lock.
type tenantSources struct {
	store tenantstore.Store
	parse func([]byte) (tenant.Policy, error)

	mu   sync.Mutex        // protects file, api, rev and gen
	file *tenant.Registry  // the tenants file's tenants
	api  map[string]apiRec // the store's tenants, by id; copied on write, never changed in place
	// rev is the newest store revision api holds: a Mirror load that read
	// an older one of the same epoch started before a change this
	// instance has already applied, and would take it back until the next
	// load. A load of another epoch, or a Rewound one, is never older: the
	// store lost the history rev counts in, and the load replaces api.
	rev tenantstore.Revision
	// gen counts the changes of file and api; a rebuild records the one
	// it was built from in built.
	gen int64

	buildMu sync.Mutex // serialises rebuilds (held without mu); protects built
	built   int64
}

// apiRec is one store tenant as mirrored here, with the store revision it
// was read or made at.
type apiRec struct {
	rec  tenantstore.Tenant
	spec tenant.Spec
	rev  tenantstore.Revision
}

// olderRevision reports whether a is before b in one store history. A
// revision of another epoch is never older: nothing orders the two.
func olderRevision(a, b tenantstore.Revision) bool {
	return a.Epoch == b.Epoch && a.N < b.N
}

// SetAPITenants replaces the store's half of the registry with l, a
// Mirror's load that holds every change up to store revision l.Rev. A load
// older than a change this instance already applied (its List began
// before that change) is dropped: the change's own notification brings
// the next load. A load from a store that lost its history (another epoch:
// a FLUSHALL or a Redis restarted without persistence; or l.Rewound: a
// failover to a replica behind) is taken whatever revision this instance
// held, so changes made after the loss hold here and tenants the store
// lost are gone. A tenant whose stored policy no longer validates is left
// out and logged, never served with a policy nobody set.
//
// A load is cheap when little changed: a record this instance already
// holds at the same version keeps its parsed policy (parsing 10,000
// policies again on every change would cost each instance seconds), and
// a load that changes nothing (the echo of this instance's own change)
// leaves the registry as it is.
func (s *Server) SetAPITenants(l tenantstore.Load) {
	if !l.Rewound && s.storeLostChanges(l.Rev) {
		l.Rewound = true
	}
	rev := l.Rev
	s.sources.mu.Lock()
	cur := s.sources.api
	s.sources.mu.Unlock()
	api := make(map[string]apiRec, len(l.Tenants))
	changed := len(l.Tenants) != len(cur)
	for _, t := range l.Tenants {
		if old, ok := cur[t.ID]; ok && sameRecord(old.rec, t) {
			if l.Rewound || !olderRevision(rev, old.rev) {
				old.rev = rev
			}
			api[t.ID] = old
			continue
		}
		changed = true
		spec, err := s.apiSpec(t)
		if err != nil {
			s.log.Error("api tenant left out: its stored policy does not validate", slog.String("tenant", t.ID), slog.String("error", err.Error()))
			continue
		}
		api[t.ID] = apiRec{rec: t, spec: spec, rev: rev}
	}
	s.sources.mu.Lock()
	if !l.Rewound && olderRevision(rev, s.sources.rev) {
		s.sources.mu.Unlock()
		return
	}
	if !changed && sameIDs(api, s.sources.api) {
		// The same tenants: api differs only in the revisions, which a
		// load of a lost history must reset.
		s.sources.api, s.sources.rev = api, rev
		s.sources.mu.Unlock()
		return
	}
	s.sources.api, s.sources.rev = api, rev
	gen := s.changedLocked()
	s.sources.mu.Unlock()
	s.rebuildThrough(gen)
}

// storeLostChanges reports whether a load at rev, older than what this
// instance holds, is so because the store lost the changes in between (a
// failover to a replica this instance's own changes had not reached: its
// Mirror sees no rewind, since it never loaded them) rather than because
// its List began before them. The store's revision never goes back
// within an epoch unless it lost history, so a store now behind what this
// instance holds did. It reads the store only for a load that would be
// dropped, bounded to 2 s; an unreadable store keeps the drop.
func (s *Server) storeLostChanges(rev tenantstore.Revision) bool {
	s.sources.mu.Lock()
	held, store := s.sources.rev, s.sources.store
	s.sources.mu.Unlock()
	if store == nil || !olderRevision(rev, held) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	now, err := store.Revision(ctx)
	return err == nil && olderRevision(now, held)
}

// sameRecord reports whether two reads of a stored tenant are the same
// version: every change sets a new version and update time, and a tenant
// deleted and made again has a new creation time.
func sameRecord(a, b tenantstore.Tenant) bool {
	return a.ID == b.ID && a.Generation == b.Generation && a.Version == b.Version && a.CreatedAt.Equal(b.CreatedAt) && a.UpdatedAt.Equal(b.UpdatedAt)
}

// sameIDs reports whether a holds the same tenants as b, each at the same
// version.
func sameIDs(a, b map[string]apiRec) bool {
	if len(a) != len(b) {
		return false
	}
	for id, r := range a {
		o, ok := b[id]
		if !ok || !sameRecord(o.rec, r.rec) {
			return false
		}
	}
	return true
}

// setAPITenant applies this instance's own change, made at store revision
// rev, at once (nil t: the tenant was removed), without waiting for the
// store's notification. Two changes of one tenant applied here out of
// order keep the newer. A change of another epoch than this instance
// holds (the store lost its data) is applied too, and the store's
// notification of it brings the full load that replaces the rest.
func (s *Server) setAPITenant(id string, t *tenantstore.Tenant, rev tenantstore.Revision) {
	var rec apiRec
	if t != nil {
		spec, err := s.apiSpec(*t)
		if err != nil {
			return // validated before it was stored; the Mirror logs it
		}
		rec = apiRec{rec: *t, spec: spec, rev: rev}
	}
	s.sources.mu.Lock()
	if cur, ok := s.sources.api[id]; ok && olderRevision(rev, cur.rev) {
		s.sources.mu.Unlock()
		return
	}
	if !olderRevision(rev, s.sources.rev) {
		s.sources.rev = rev
	}
	api := maps.Clone(s.sources.api)
	if api == nil {
		api = map[string]apiRec{}
	}
	if t == nil {
		delete(api, id)
	} else {
		api[id] = rec
	}
	s.sources.api = api
	gen := s.changedLocked()
	s.sources.mu.Unlock()
	s.rebuildThrough(gen) // live here when the admin call answers
}

func (s *Server) apiSpec(t tenantstore.Tenant) (tenant.Spec, error) {
	p, err := s.sources.parse(t.Policy)
	if err != nil {
		return tenant.Spec{}, err
	}
	spec := tenant.Spec{ID: t.ID, Source: tenant.SourceAPI, Doc: t.Policy, Policy: p, Generation: t.Generation}
	for _, k := range t.Keys {
		tk := tenant.Key{ID: k.ID, SHA256: k.SHA256}
		if k.ExpiresAt != nil {
			tk.ExpiresAt = *k.ExpiresAt
		}
		spec.Keys = append(spec.Keys, tk)
	}
	return spec, nil
}

// changedLocked notes a change of file or api (s.sources.mu held) and
// returns the generation to pass to rebuildThrough.
func (s *Server) changedLocked() int64 {
	s.sources.gen++
	return s.sources.gen
}

// rebuildThrough returns once the running registry holds every change up
// to generation gen. A rebuild takes what the sources hold when it starts,
// so the changes made while another rebuild ran share the next one: a
// burst of admin changes (10,000 tenants each rebuild 20 ms) costs a
// rebuild per burst step, not per change.
func (s *Server) rebuildThrough(gen int64) {
	s.sources.buildMu.Lock()
	defer s.sources.buildMu.Unlock()
	if s.sources.built >= gen {
		return
	}
	s.sources.mu.Lock()
	file, api, g := s.sources.file, s.sources.api, s.sources.gen
	s.sources.mu.Unlock()
	s.sources.built = g
	s.rebuild(file, api)
}

// rebuild merges the two halves and swaps the result in. The file's
// tenants win an id both have.
func (s *Server) rebuild(file *tenant.Registry, api map[string]apiRec) {
	if len(api) == 0 {
		s.tenants.Store(file)
		return
	}
	ids := make([]string, 0, len(api))
	for id := range api {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	specs := make([]tenant.Spec, 0, len(ids))
	for _, id := range ids {
		specs = append(specs, api[id].spec)
	}
	reg, shadowed, err := file.With(s.tenants.Load(), specs)
	if err != nil {
		s.log.Error("api tenants not applied; keeping the running tenants", slog.String("error", err.Error()))
		return
	}
	for _, id := range shadowed {
		s.log.Warn("api tenant hidden: the tenants file declares the same id", slog.String("tenant", id))
	}
	s.tenants.Store(reg)
}

// tenantJSON is a tenant as the admin API shows it: never a key or its
// hash.
type tenantJSON struct {
	ID        string          `json:"id"`
	Source    tenant.Source   `json:"source"`
	Policy    json.RawMessage `json:"policy"`
	Keys      []string        `json:"keys"`
	Version   int64           `json:"version,omitempty"`
	CreatedAt *time.Time      `json:"created_at,omitempty"`
	UpdatedAt *time.Time      `json:"updated_at,omitempty"`
}

func fileTenantJSON(spec tenant.Spec) tenantJSON {
	doc := json.RawMessage(spec.Doc)
	if len(doc) == 0 {
		doc = json.RawMessage("{}")
	}
	return tenantJSON{ID: spec.ID, Source: tenant.SourceFile, Policy: doc, Keys: fileKeyIDs(len(spec.KeySHA256))}
}

// fileKeyIDs names a file tenant's n keys file_1 … file_n, by their place
// in its keys list: the file holds only their sha256, which the admin API
// never shows, so the place is the one name they have.
func fileKeyIDs(n int) []string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = "file_" + strconv.Itoa(i+1)
	}
	return ids
}

func apiTenantJSON(t tenantstore.Tenant) tenantJSON {
	keys := make([]string, 0, len(t.Keys))
	for _, k := range t.Keys {
		keys = append(keys, k.ID)
	}
	c, u := t.CreatedAt, t.UpdatedAt
	return tenantJSON{ID: t.ID, Source: tenant.SourceAPI, Policy: t.Policy, Keys: keys, Version: t.Version, CreatedAt: &c, UpdatedAt: &u}
}

// handleListTenants answers every tenant, the file's and the store's, from
// this instance's copy (it answers while the store is down).
func (s *Server) handleListTenants(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, map[string]any{"tenants": s.listTenants()})
}

// handleGetTenant answers one tenant; an API tenant is read from the store
// so the answer is its latest version.
func (s *Server) handleGetTenant(w http.ResponseWriter, r *http.Request) {
	t, aerr := s.getTenant(r.Context(), chi.URLParam(r, "id"))
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, t)
}

// listTenants is every tenant, the file's and the store's, from this
// instance's copy (it answers while the store is down).
func (s *Server) listTenants() []tenantJSON {
	s.sources.mu.Lock()
	defer s.sources.mu.Unlock()
	reg := s.tenants.Load()
	out := []tenantJSON{}
	for _, id := range reg.IDs() {
		if spec, ok := s.sources.file.Spec(id); ok {
			out = append(out, fileTenantJSON(spec))
		} else if a, ok := s.sources.api[id]; ok {
			out = append(out, apiTenantJSON(a.rec))
		}
	}
	return out
}

// getTenant is one tenant: a file tenant from the file, an API tenant
// from the store (its latest version).
func (s *Server) getTenant(ctx context.Context, id string) (tenantJSON, *apiError) {
	if spec, ok := s.fileTenant(id); ok {
		return fileTenantJSON(spec), nil
	}
	t, err := s.storeGet(ctx, id)
	if err != nil {
		return tenantJSON{}, s.storeError(ctx, id, err)
	}
	return apiTenantJSON(t), nil
}

func (s *Server) fileTenant(id string) (tenant.Spec, bool) {
	s.sources.mu.Lock()
	defer s.sources.mu.Unlock()
	return s.sources.file.Spec(id)
}

func (s *Server) storeGet(ctx context.Context, id string) (tenantstore.Tenant, error) {
	if s.sources.store == nil {
		return tenantstore.Tenant{}, errNoTenantStore
	}
	if !keying.ValidTenantID(id) {
		return tenantstore.Tenant{}, tenantstore.ErrNotFound
	}
	return s.sources.store.Get(ctx, id)
}

// handleCreateTenant creates an API tenant from {"id":..} and any policy
// field of the tenants file.
func (s *Server) handleCreateTenant(w http.ResponseWriter, r *http.Request) {
	fields, aerr := readAdminObject(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	t, aerr := s.createTenant(r.Context(), r.RemoteAddr, fields)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(apiTenantJSON(t))
}

// createTenant creates an API tenant from fields: "id" and any policy
// field of the tenants file. remote is who asked, for the audit trail.
func (s *Server) createTenant(ctx context.Context, remote string, fields map[string]json.RawMessage) (tenantstore.Tenant, *apiError) {
	var id string
	if raw, ok := fields["id"]; !ok || json.Unmarshal(raw, &id) != nil || !keying.ValidTenantID(id) {
		return tenantstore.Tenant{}, errInvalidRequest("The tenant needs an \"id\" matching [a-z0-9_-]{1,64}.", "id")
	}
	rest := make(map[string]json.RawMessage, len(fields))
	for k, v := range fields {
		if k != "id" {
			rest[k] = v
		}
	}
	policy, err := json.Marshal(rest)
	if err != nil {
		return tenantstore.Tenant{}, errInternal
	}
	if _, ok := s.fileTenant(id); ok {
		return tenantstore.Tenant{}, errManagedByFile(id)
	}
	if _, err := s.sources.parsePolicy(policy); err != nil {
		return tenantstore.Tenant{}, statusOfStore(err, id)
	}
	return s.apply(ctx, tenantstore.TenantCreated{ID: id, Policy: policy}, remote)
}

func (ts *tenantSources) parsePolicy(doc []byte) (tenant.Policy, error) {
	if ts.parse == nil {
		return tenant.Policy{}, errNoTenantStore
	}
	return ts.parse(doc)
}

// apiTenantID is the {id} of an admin route that changes an API tenant or
// its keys; a tenant of the tenants file is refused (409
// tenant_managed_by_file), as the file is where it is managed.
func (s *Server) apiTenantID(w http.ResponseWriter, r *http.Request) (string, bool) {
	id := chi.URLParam(r, "id")
	if aerr := s.refuseFileTenant(id); aerr != nil {
		writeError(w, aerr)
		return "", false
	}
	return id, true
}

// apiTenantChange is the {id} and the JSON object body of an admin
// request that changes an API tenant or adds to it; ok is false when
// either was refused, the error already answered.
func (s *Server) apiTenantChange(w http.ResponseWriter, r *http.Request) (id string, fields map[string]json.RawMessage, ok bool) {
	if id, ok = s.apiTenantID(w, r); !ok {
		return "", nil, false
	}
	fields, aerr := readAdminObject(r)
	if aerr != nil {
		writeError(w, aerr)
		return "", nil, false
	}
	return id, fields, true
}

// refuseFileTenant refuses a change to a tenant of the tenants file.
func (s *Server) refuseFileTenant(id string) *apiError {
	if _, ok := s.fileTenant(id); ok {
		return errManagedByFile(id)
	}
	return nil
}

// handlePatchTenant applies a JSON merge patch to an API tenant's policy,
// on the store's latest version.
func (s *Server) handlePatchTenant(w http.ResponseWriter, r *http.Request) {
	id, fields, ok := s.apiTenantChange(w, r)
	if !ok {
		return
	}
	t, aerr := s.patchTenant(r.Context(), r.RemoteAddr, id, fields)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, apiTenantJSON(t))
}

// patchTenant applies the merge patch fields to API tenant id's policy.
func (s *Server) patchTenant(ctx context.Context, remote, id string, fields map[string]json.RawMessage) (tenantstore.Tenant, *apiError) {
	if aerr := s.refuseFileTenant(id); aerr != nil {
		return tenantstore.Tenant{}, aerr
	}
	if _, ok := fields["id"]; ok {
		return tenantstore.Tenant{}, errInvalidRequest("A tenant's id cannot be changed; create a new tenant instead.", "id")
	}
	patch, err := json.Marshal(fields)
	if err != nil {
		return tenantstore.Tenant{}, errInternal
	}
	if !keying.ValidTenantID(id) {
		return tenantstore.Tenant{}, errUnknownTenant(id)
	}
	check := func(doc json.RawMessage) error {
		_, err := s.sources.parsePolicy(doc)
		return err
	}
	return s.apply(ctx, tenantstore.TenantUpdated{ID: id, Patch: patch, Check: check}, remote)
}

// handleDeleteTenant removes an API tenant: its keys stop working here at
// once and everywhere within a second, and its cache is purged. The
// records of its stored objects are kept, for PUT .../objects to reassign.
func (s *Server) handleDeleteTenant(w http.ResponseWriter, r *http.Request) {
	id, ok := s.apiTenantID(w, r)
	if !ok {
		return
	}
	out, aerr := s.deleteTenant(r.Context(), r.RemoteAddr, id)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, out)
}

// deleteTenant removes API tenant id and purges its cache; the answer
// says whether the purge completed.
func (s *Server) deleteTenant(ctx context.Context, remote, id string) (map[string]any, *apiError) {
	if aerr := s.refuseFileTenant(id); aerr != nil {
		return nil, aerr
	}
	if !keying.ValidTenantID(id) {
		return nil, errUnknownTenant(id)
	}
	gone, aerr := s.apply(ctx, tenantstore.TenantDeleted{ID: id}, remote)
	if aerr != nil {
		return nil, aerr
	}
	out := map[string]any{"id": id, "deleted": true}
	if n, err := s.purgeTenant(ctx, tenant.ScopeOf(id, gone.Generation)); err != nil {
		// The tenant is gone (its keys no longer work); only its entries
		// linger until their TTL. Said in the answer and the log.
		recordFrom(ctx).err = err.Error()
		out["cache_purged"] = false
	} else {
		out["cache_purged"], out["purged"] = true, n
	}
	return out, nil
}

// apply is the one place an admin change is made, whether it came from
// the JSON API or the console: applied to the store (which audits and
// announces it), applied to this instance's copy, and logged as
// msg=admin. remote is the address it came from.
func (s *Server) apply(ctx context.Context, c tenantstore.Change, remote string) (tenantstore.Tenant, *apiError) {
	if s.sources.store == nil {
		return tenantstore.Tenant{}, statusOfStore(errNoTenantStore, "")
	}
	t, ev, err := s.sources.store.Apply(ctx, c, tenantstore.Meta{Time: s.now(), Remote: remote})
	if err != nil {
		return tenantstore.Tenant{}, s.storeError(ctx, changeTenant(c), err)
	}
	if ev.Action == tenantstore.ActionTenantDeleted {
		s.setAPITenant(t.ID, nil, ev.Revision)
	} else {
		s.setAPITenant(t.ID, &t, ev.Revision)
	}
	attrs := []any{slog.String("action", string(ev.Action)), slog.String("tenant", ev.Tenant)}
	if ev.KeyID != "" {
		attrs = append(attrs, slog.String("key_id", ev.KeyID))
	}
	attrs = append(attrs, slog.String("remote_addr", ev.Remote), slog.String("request_id", requestIDFrom(ctx)))
	s.log.Info("admin", attrs...)
	return t, nil
}

func changeTenant(c tenantstore.Change) string {
	switch c := c.(type) {
	case tenantstore.TenantCreated:
		return c.ID
	case tenantstore.TenantUpdated:
		return c.ID
	case tenantstore.TenantDeleted:
		return c.ID
	case tenantstore.KeyCreated:
		return c.Tenant
	case tenantstore.KeyRevoked:
		return c.Tenant
	}
	return ""
}

func isRefusal(err error) bool {
	var pe *tenant.PolicyError
	return errors.Is(err, tenantstore.ErrExists) || errors.Is(err, tenantstore.ErrNotFound) ||
		errors.Is(err, tenantstore.ErrKeyNotFound) || errors.As(err, &pe)
}

func (s *Server) writeStoreError(w http.ResponseWriter, r *http.Request, id string, err error) {
	writeError(w, s.storeError(r.Context(), id, err))
}

// storeError is the answer to a store error about tenant id; a failure
// (not a refusal) is noted on the request's log line.
func (s *Server) storeError(ctx context.Context, id string, err error) *apiError {
	if !isRefusal(err) {
		recordFrom(ctx).err = err.Error()
	}
	return statusOfStore(err, id)
}

// readAdminObject reads an admin change's body: one JSON object of at
// most 64 KiB. Unknown members are the caller's to refuse (the policy
// parser names them).
func readAdminObject(r *http.Request) (map[string]json.RawMessage, *apiError) {
	body, err := io.ReadAll(io.LimitReader(r.Body, adminBodyLimit+1))
	if err != nil {
		return nil, errInvalidRequest("The request body could not be read.", "")
	}
	if len(body) > adminBodyLimit {
		return nil, errAdminTooLarge
	}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return map[string]json.RawMessage{}, nil
	}
	fields, ok := oneObject(body)
	if !ok {
		return nil, errInvalidRequest("The body must be one JSON object.", "")
	}
	return fields, nil
}

// oneObject decodes doc as exactly one JSON object and nothing after it
// but space: Decoder.More alone lets a stray "}" or "]" through.
func oneObject(doc []byte) (map[string]json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(doc))
	if err := dec.Decode(&fields); err != nil || fields == nil {
		return nil, false
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, false
	}
	return fields, true
}
