package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-chi/chi/v5"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/tenantstore"
)

var keyIDPattern = regexp.MustCompile(`^key_[0-9a-f]{24}$`)

// newKey makes a key (tenant.NewKey) and its id.
func newKey() (id, key string) {
	var rid [12]byte
	_, _ = rand.Read(rid[:]) // crypto/rand.Read never fails (Go 1.24+)
	return "key_" + hex.EncodeToString(rid[:]), tenant.NewKey()
}

// KeyListing is one key as GET /admin/tenants/{id}/keys lists it: never
// the key or its hash. The gateway keys list command decodes this type,
// so the command and the API cannot disagree on a field.
type KeyListing struct {
	ID        string     `json:"id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
	LastUsed  *time.Time `json:"last_used"`
}

// createdKeyJSON is the one answer that carries a key.
type createdKeyJSON struct {
	ID        string     `json:"id"`
	Key       string     `json:"key"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	CreatedAt time.Time  `json:"created_at"`
	ExpiresAt *time.Time `json:"expires_at"`
}

// handleCreateKey makes a key for an API tenant: {"name":..,"expires_at":..},
// both optional. The key is in this answer only; the store keeps its
// sha256.
func (s *Server) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	id, fields, ok := s.apiTenantChange(w, r)
	if !ok {
		return
	}
	k, aerr := s.createKey(r.Context(), r.RemoteAddr, id, fields)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(k)
}

// createKey makes a key for API tenant id from fields ("name",
// "expires_at"); the answer is the only place the key is ever shown.
func (s *Server) createKey(ctx context.Context, remote, id string, fields map[string]json.RawMessage) (createdKeyJSON, *apiError) {
	if aerr := s.refuseFileTenant(id); aerr != nil {
		return createdKeyJSON{}, aerr
	}
	var req struct {
		Name      string
		ExpiresAt *time.Time
	}
	for name, raw := range fields {
		switch name {
		case "name":
			if json.Unmarshal(raw, &req.Name) != nil || !validKeyName(req.Name) {
				return createdKeyJSON{}, errInvalidRequest("\"name\" must be a string of at most 64 printable characters (no control, format or bidi characters), not starting with \"sk-\".", "name")
			}
		case "expires_at":
			var t time.Time
			if string(raw) == "null" {
				continue
			}
			if json.Unmarshal(raw, &t) != nil {
				return createdKeyJSON{}, errInvalidRequest("\"expires_at\" must be an RFC 3339 time such as 2027-01-31T00:00:00Z.", "expires_at")
			}
			if !t.After(s.now()) {
				return createdKeyJSON{}, errInvalidRequest("\"expires_at\" is in the past; a key must expire in the future.", "expires_at")
			}
			t = t.UTC()
			if t.Year() > maxExpiryYear {
				// RFC 3339 writes four-digit years: the key could not be stored.
				return createdKeyJSON{}, errInvalidRequest("\"expires_at\" must be before 10000-01-01T00:00:00Z.", "expires_at")
			}
			req.ExpiresAt = &t
		default:
			return createdKeyJSON{}, errInvalidRequest("Unknown field "+jsonQuote(clipField(name))+"; a key takes \"name\" and \"expires_at\".", clipField(name))
		}
	}
	if !keying.ValidTenantID(id) {
		return createdKeyJSON{}, errUnknownTenant(id)
	}
	keyID, key := newKey()
	k := tenantstore.Key{
		ID: keyID, Name: req.Name, SHA256: tenant.HashKey(key), Prefix: tenant.ShownPrefix(key),
		CreatedAt: s.now().UTC().Truncate(time.Second), ExpiresAt: req.ExpiresAt,
	}
	if _, aerr := s.apply(ctx, tenantstore.KeyCreated{Tenant: id, Key: k}, remote); aerr != nil {
		return createdKeyJSON{}, aerr
	}
	return createdKeyJSON{ID: k.ID, Key: key, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt}, nil
}

// maxExpiryYear is the last year a key's expires_at may fall in, in UTC:
// RFC 3339, the store's form, writes four-digit years.
const maxExpiryYear = 9999

// validKeyName refuses a name that is too long, not text, or looks like
// a key: a key pasted into the name would be listed to every admin. It
// also refuses every character that shows as something else or as
// nothing, so a name cannot pass for another in the console or `gateway
// keys list`: C0 and C1 controls and DEL (Cc), format characters (Cf:
// the bidi overrides, embeddings and isolates U+202A–202E and
// U+2066–2069, the marks U+200E/F and U+061C, zero-width characters, the
// BOM) and the line and paragraph separators (Zl, Zp).
func validKeyName(n string) bool {
	if utf8.RuneCountInString(n) > 64 || !utf8.ValidString(n) || strings.HasPrefix(strings.ToLower(n), "sk-") {
		return false
	}
	return !strings.ContainsFunc(n, func(r rune) bool {
		return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Zl, unicode.Zp)
	})
}

// clipField bounds a field name quoted back to the client.
func clipField(s string) string {
	if len(s) > 64 || !utf8.ValidString(s) {
		return "…"
	}
	return s
}

// handleListKeys lists an API tenant's keys with their last use, to the
// minute: the store's record joined with this instance's uses not yet
// written.
func (s *Server) handleListKeys(w http.ResponseWriter, r *http.Request) {
	id, ok := s.apiTenantID(w, r)
	if !ok {
		return
	}
	out, aerr := s.listKeys(r.Context(), id)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, map[string]any{"keys": out})
}

// listKeys is API tenant id's keys, never a key or its hash.
func (s *Server) listKeys(ctx context.Context, id string) ([]KeyListing, *apiError) {
	if aerr := s.refuseFileTenant(id); aerr != nil {
		return nil, aerr
	}
	t, err := s.storeGet(ctx, id)
	if err != nil {
		return nil, s.storeError(ctx, id, err)
	}
	ids := make([]string, 0, len(t.Keys))
	for _, k := range t.Keys {
		ids = append(ids, k.ID)
	}
	used, err := s.sources.store.LastUsed(ctx, ids)
	if err != nil {
		return nil, s.storeError(ctx, id, err)
	}
	for kid, u := range s.tenants.Load().Used(0) {
		if prev, ok := used[kid]; !ok || u.At.After(prev) {
			used[kid] = u.At
		}
	}
	out := make([]KeyListing, 0, len(t.Keys))
	for _, k := range t.Keys {
		kj := KeyListing{ID: k.ID, Name: k.Name, Prefix: k.Prefix, CreatedAt: k.CreatedAt, ExpiresAt: k.ExpiresAt}
		if at, ok := used[k.ID]; ok {
			// Uses are kept to the minute, so a key used in the minute it
			// was made would read as used before it existed: it was used
			// no earlier than its creation, which is what it shows then.
			at = at.Truncate(time.Minute)
			if at.Before(k.CreatedAt) {
				at = k.CreatedAt
			}
			kj.LastUsed = &at
		}
		out = append(out, kj)
	}
	return out, nil
}

// handleRevokeKey revokes a key: 401 here at once, everywhere within a
// second.
func (s *Server) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	id, keyID := chi.URLParam(r, "id"), chi.URLParam(r, "key_id")
	if aerr := s.revokeKey(r.Context(), r.RemoteAddr, id, keyID); aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, map[string]any{"id": keyID, "revoked": true})
}

// revokeKey revokes API tenant id's key keyID.
func (s *Server) revokeKey(ctx context.Context, remote, id, keyID string) *apiError {
	if aerr := s.refuseFileTenant(id); aerr != nil {
		return aerr
	}
	if !keyIDPattern.MatchString(keyID) {
		return errInvalidRequest("A key id is key_ and 24 hex digits.", "key_id")
	}
	if !keying.ValidTenantID(id) {
		return errUnknownTenant(id)
	}
	_, aerr := s.apply(ctx, tenantstore.KeyRevoked{Tenant: id, KeyID: keyID}, remote)
	return aerr
}
