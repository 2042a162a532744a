package config

import (
	"encoding/json"
	"errors"
	"strings"

	"github.com/goccy/go-yaml"
)

// ParsePolicy validates an API tenant's policy: a JSON object of the
// tenants file's policy fields (a tenant's fields but id and keys). It
// runs the tenants file's own decoder and validation, so a field added to
// TenantSpec is accepted and checked here with no change, and unknown
// fields, bad durations and bad limits are refused alike. The error is a
// *FileError whose Field is the policy field (cache_ttl, models[1]).
func ParsePolicy(doc []byte) (TenantSpec, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil || m == nil {
		return TenantSpec{}, &FileError{Kind: "policy", Problem: "must be a JSON object of tenants-file fields"}
	}
	for _, f := range []string{"id", "keys"} {
		if _, ok := m[f]; ok {
			return TenantSpec{}, &FileError{Kind: "policy", Field: f, Problem: "is not a policy field"}
		}
	}
	m["id"] = json.RawMessage(`"policy"`)
	m["keys"] = json.RawMessage(`[{"sha256":"` + strings.Repeat("0", 64) + `"}]`)
	wrapped, err := json.Marshal(map[string]any{"tenants": []any{m}})
	if err != nil {
		return TenantSpec{}, &FileError{Kind: "policy", Problem: "must be a JSON object of tenants-file fields"}
	}
	tf, err := ParseTenants("policy", wrapped)
	if err != nil {
		var fe *FileError
		if !errors.As(err, &fe) {
			return TenantSpec{}, err
		}
		out := *fe
		out.Kind, out.File, out.Line = "policy", "", 0
		out.Field = strings.TrimPrefix(strings.TrimPrefix(out.Field, "tenants[0]"), ".")
		return TenantSpec{}, &out
	}
	t := tf.Tenants[0]
	t.ID, t.Keys = "", nil
	return t, nil
}

// PolicyJSON is the tenant's policy as a JSON object of tenants-file
// fields (the fields set, without id and keys), as the admin API shows a
// file tenant. A tenant without a models line has no "models" member
// (every model), so the object, copied into an API tenant's policy,
// allows what the file tenant allows; `models: []` stays [] (none).
func (t TenantSpec) PolicyJSON() []byte {
	t.ID, t.Keys = "", nil
	b, err := yaml.MarshalWithOptions(t, yaml.JSON())
	if err != nil {
		return []byte("{}")
	}
	var m map[string]any
	if err := yaml.Unmarshal(b, &m); err != nil {
		return []byte("{}")
	}
	for k, v := range m {
		if v == nil || k == "id" || k == "keys" {
			delete(m, k)
		}
	}
	if t.Models == nil {
		// No models line allows every model; YAML writes the nil list as
		// [], which as a policy would allow none.
		delete(m, "models")
	}
	out, err := json.Marshal(m)
	if err != nil {
		return []byte("{}")
	}
	return out
}

// MarshalText writes the duration in Go syntax, as the file takes it.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.Duration.String()), nil }
