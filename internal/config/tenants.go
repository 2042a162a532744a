package config

import (
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/goccy/go-yaml"
	"github.com/goccy/go-yaml/parser"

	"github.com/corralhq/corral/internal/spend"
)

// DefaultMaxLeaders is a tenant's concurrent upstream calls per instance
// when the tenants file does not say.
const DefaultMaxLeaders = 8

// TenantsFile is the parsed tenants file.
type TenantsFile struct {
	Tenants []TenantSpec `yaml:"tenants"`
}

// TenantSpec is one tenant as the tenants file declares it. Pointer fields
// distinguish "absent" from an explicit zero.
type TenantSpec struct {
	// ID names the tenant inside Redis keys, metrics and logs: [a-z0-9_-]{1,64}.
	ID string `yaml:"id"`
	// Keys are the sha256 hashes of the tenant's bearer keys.
	Keys []KeySpec `yaml:"keys"`
	// RequestsPerMinute limits every request; 0 or absent = unlimited.
	RequestsPerMinute int `yaml:"requests_per_minute"`
	// TokensPerMinute limits upstream token spend; 0 or absent = unlimited.
	TokensPerMinute int `yaml:"tokens_per_minute"`
	// MaxLeaders bounds concurrent upstream calls per instance; default 8.
	MaxLeaders *int `yaml:"max_leaders"`
	// Models is the allow-list; absent = every model.
	Models []string `yaml:"models"`
	// CacheTTL overrides CORRAL_CACHE_TTL for this tenant.
	CacheTTL *Duration `yaml:"cache_ttl"`
	// NegativeTTL overrides CORRAL_NEGATIVE_TTL for this tenant.
	NegativeTTL *Duration `yaml:"negative_ttl"`
	// StaleWhileRevalidate overrides CORRAL_STALE_WHILE_REVALIDATE: how
	// long past its TTL an entry is served at once while one background
	// call refreshes it; 0 = off.
	StaleWhileRevalidate *Duration `yaml:"stale_while_revalidate"`
	// StaleIfError overrides CORRAL_STALE_IF_ERROR: how long past its TTL
	// an entry is served when the upstream call fails transiently; 0 = off.
	StaleIfError *Duration `yaml:"stale_if_error"`
	// Cache false means never cache or coalesce this tenant's requests.
	Cache *bool `yaml:"cache"`
	// StoredObjects is "isolated" (default: the tenant reaches only the
	// stored objects it created) or "deny" (no stored objects at all).
	StoredObjects string `yaml:"stored_objects"`
	// BudgetUSDPerDay and BudgetUSDPerMonth cap the tenant's upstream
	// spend per UTC day and calendar month, in USD (at most 9 decimals); 0
	// or absent = none.
	BudgetUSDPerDay   *PerMtok `yaml:"budget_usd_per_day"`
	BudgetUSDPerMonth *PerMtok `yaml:"budget_usd_per_month"`
	// UnmeteredEndpoints is "allow" to let a budgeted tenant make proxied
	// POSTs Corral cannot price (images, audio, batches, fine-tuning);
	// absent = refused with 403 budget_unmetered_endpoint.
	UnmeteredEndpoints string `yaml:"unmetered_endpoints"`

	// budget is the validated budgets, set by validation.
	budget spend.Limits
}

// Budget returns the tenant's validated budgets (zero = none).
func (t TenantSpec) Budget() spend.Limits { return t.budget }

// AllowsUnmetered reports unmetered_endpoints: allow.
func (t TenantSpec) AllowsUnmetered() bool { return t.UnmeteredEndpoints == "allow" }

// Duration is a Go-syntax duration in the tenants file ("30s", "1h").
// A malformed value is kept and reported by validation, which knows the
// field's path and line; the YAML decoder's own error would not.
type Duration struct {
	time.Duration
	bad string // the malformed text, "" when valid
}

// UnmarshalText parses a duration, remembering a malformed one.
func (d *Duration) UnmarshalText(text []byte) error {
	v, err := time.ParseDuration(string(text))
	if err != nil {
		d.bad = string(text)
		if d.bad == "" {
			d.bad = `""`
		}
		return nil
	}
	d.Duration = v
	return nil
}

// KeySpec is one accepted key, stored only as its hash.
type KeySpec struct {
	SHA256 string `yaml:"sha256"`
}

// Leaders returns MaxLeaders or its default.
func (t TenantSpec) Leaders() int {
	if t.MaxLeaders == nil {
		return DefaultMaxLeaders
	}
	return *t.MaxLeaders
}

// DeniesObjects reports whether stored_objects is "deny".
func (t TenantSpec) DeniesObjects() bool { return t.StoredObjects == "deny" }

// Caches reports whether the tenant's requests are cached and coalesced.
func (t TenantSpec) Caches() bool { return t.Cache == nil || *t.Cache }

var tenantIDPattern = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// LoadTenants reads and validates the tenants file at path.
func LoadTenants(path string) (*TenantsFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tenants file: %w", err)
	}
	return ParseTenants(path, data)
}

// ParseTenants parses and validates tenants file content; name is used in
// error messages.
func ParseTenants(name string, data []byte) (*TenantsFile, error) {
	var tf TenantsFile
	if err := decodeFile("tenants file", name, "a tenants: list (see the README's Tenants file)", data, &tf); err != nil {
		return nil, redactFileError(err)
	}
	v := validator{name: name, data: data}
	return &tf, v.validate(&tf)
}

// redactFileError keeps a decoding error from echoing the file: a file
// that is not a tenants file at all (a key pasted in, a binary, the wrong
// path) must not land in logs and admin answers byte for byte. Only words
// that look like field names or plain values ("colour" in unknown field
// "colour", got "lots") are quoted back; anything else becomes "…".
func redactFileError(err error) error {
	var fe *FileError
	if !errors.As(err, &fe) {
		return err
	}
	fe.Problem = quotedWords.ReplaceAllStringFunc(fe.Problem, redactQuoted)
	if !printable.MatchString(fe.Problem) || len(fe.Problem) > 200 {
		fe.Problem = "not a valid YAML tenants file"
	}
	if !fieldPathPattern.MatchString(fe.Field) {
		fe.Field = ""
	}
	return fe
}

var (
	fieldName        = regexp.MustCompile(`^[a-z][a-z0-9_]{0,63}$`)
	fieldPathPattern = regexp.MustCompile(`^([a-z][a-z0-9_]{0,63}(\[[0-9]+\])*(\.|$))*$`)
	quotedWords      = regexp.MustCompile(`"[^"]*"|'[^']*'`)
	printable        = regexp.MustCompile(`^[ -~…]*$`)
)

// redactQuoted keeps a quoted word that looks like a field name, or a
// single bracket or separator the parser names (']' not found).
func redactQuoted(q string) string {
	inner := q[1 : len(q)-1]
	if fieldName.MatchString(inner) || (len(inner) == 1 && strings.Contains("[]{}:,-", inner)) {
		return q
	}
	return `"…"`
}

// clip bounds a value quoted back from the file.
func clip(s string) string {
	if len(s) > 64 {
		return s[:32] + "…"
	}
	return s
}

type validator struct {
	kind string // "" = tenants file
	name string
	data []byte
	errs []error
}

func (v *validator) fail(path, field, format string, args ...any) {
	v.errs = append(v.errs, &FileError{
		Kind:    v.kind,
		File:    v.name,
		Line:    v.line("$." + path),
		Field:   field,
		Problem: fmt.Sprintf(format, args...),
	})
}

// line finds the line of a YAML path; the decoder already proved the file
// parses, so a failed lookup only loses the line number.
func (v *validator) line(path string) int {
	p, err := yaml.PathString(path)
	if err != nil {
		return 0
	}
	f, err := parser.ParseBytes(v.data, 0)
	if err != nil {
		return 0
	}
	n, err := p.FilterFile(f)
	if err != nil || n == nil || n.GetToken() == nil || n.GetToken().Position == nil {
		return 0
	}
	return n.GetToken().Position.Line
}

// usd reads a budget in USD: 0 or more, at most 9 decimals.
func (v *validator) usd(path string, p *PerMtok) spend.Nanodollars {
	if p == nil {
		return 0
	}
	n, err := spend.ParseUSD(p.text)
	switch {
	case err != nil:
		v.fail(path, path, "want an amount of USD such as 25 or 0.50, got %q", clip(p.text))
	case n < 0:
		v.fail(path, path, "must be 0 (none) or more")
	default:
		return n
	}
	return 0
}

func (v *validator) duration(path string, d *Duration) {
	switch {
	case d == nil:
	case d.bad != "":
		v.fail(path, path, "bad duration %q: use Go syntax such as 30s, 5m, 1h", clip(d.bad))
	case d.Duration <= 0:
		v.fail(path, path, "must be a positive duration")
	}
}

// window checks a stale window: 0 (off) or positive.
func (v *validator) window(path string, d *Duration) {
	switch {
	case d == nil:
	case d.bad != "":
		v.fail(path, path, "bad duration %q: use Go syntax such as 30s, 5m, 1h", clip(d.bad))
	case d.Duration < 0:
		v.fail(path, path, "must be 0 (off) or a positive duration")
	}
}

func (v *validator) validate(tf *TenantsFile) error {
	ids := map[string]int{}
	hashes := map[string]string{}
	for i, t := range tf.Tenants {
		at := fmt.Sprintf("tenants[%d]", i)
		if !tenantIDPattern.MatchString(t.ID) {
			v.fail(at+".id", at+".id", "bad id %q: must match [a-z0-9_-]{1,64}", clip(t.ID))
		} else if prev, dup := ids[t.ID]; dup {
			v.fail(at+".id", at+".id", "duplicate id %q (also tenants[%d])", t.ID, prev)
		} else {
			ids[t.ID] = i
		}
		if len(t.Keys) == 0 {
			v.fail(at, at+".keys", "at least one key is required")
		}
		for j, k := range t.Keys {
			kat := fmt.Sprintf("%s.keys[%d].sha256", at, j)
			raw, err := hex.DecodeString(k.SHA256)
			if err != nil || len(raw) != 32 {
				v.fail(kat, kat, "must be 64 hex characters (sha256 of the key; see `gateway keygen`)")
				continue
			}
			norm := hex.EncodeToString(raw)
			if owner, dup := hashes[norm]; dup {
				v.fail(kat, kat, "duplicate key hash (also used by tenant %q)", owner)
				continue
			}
			hashes[norm] = t.ID
		}
		if t.RequestsPerMinute < 0 {
			v.fail(at+".requests_per_minute", at+".requests_per_minute", "must be 0 (unlimited) or positive")
		}
		if t.TokensPerMinute < 0 {
			v.fail(at+".tokens_per_minute", at+".tokens_per_minute", "must be 0 (unlimited) or positive")
		}
		if t.MaxLeaders != nil && *t.MaxLeaders < 1 {
			v.fail(at+".max_leaders", at+".max_leaders", "must be at least 1")
		}
		switch t.StoredObjects {
		case "", "isolated", "deny":
		default:
			v.fail(at+".stored_objects", at+".stored_objects", "bad value %q: must be isolated or deny", t.StoredObjects)
		}
		tf.Tenants[i].budget.Day = v.usd(at+".budget_usd_per_day", t.BudgetUSDPerDay)
		tf.Tenants[i].budget.Month = v.usd(at+".budget_usd_per_month", t.BudgetUSDPerMonth)
		switch t.UnmeteredEndpoints {
		case "", "allow", "deny":
		default:
			v.fail(at+".unmetered_endpoints", at+".unmetered_endpoints", "bad value %q: must be allow or deny", clip(t.UnmeteredEndpoints))
		}
		v.duration(at+".cache_ttl", t.CacheTTL)
		v.duration(at+".negative_ttl", t.NegativeTTL)
		v.window(at+".stale_while_revalidate", t.StaleWhileRevalidate)
		v.window(at+".stale_if_error", t.StaleIfError)
		for j, m := range t.Models {
			if m == "" {
				mat := fmt.Sprintf("%s.models[%d]", at, j)
				v.fail(mat, mat, "empty model name")
			}
		}
	}
	return errors.Join(v.errs...)
}
