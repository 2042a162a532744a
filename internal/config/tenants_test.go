package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

const hashA = "2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"
const hashB = "fcde2b2edba56bf408601fb721fe9b5c338d10ee429ea04fae5511b68fbf8fb9"

// keyA is the keys line of a tenant holding hashA, the third line of most
// tenants files below (after "tenants:" and "- id:"), so a case's own line
// is line 4.
const keyA = "    keys: [{sha256: \"" + hashA + "\"}]\n"

func TestParseTenantsYAML(t *testing.T) {
	tf, err := ParseTenants("t.yaml", []byte(`
tenants:
  - id: acme
    keys:
      - sha256: "`+hashA+`"
    requests_per_minute: 600
    tokens_per_minute: 200000
    max_leaders: 4
    models: ["gpt-4o-mini"]
    cache_ttl: 2h
    stale_while_revalidate: 10m
    stale_if_error: 24h
    cache: false
  - id: beta_2
    keys: [{sha256: "`+strings.ToUpper(hashB)+`"}]
`))
	if err != nil {
		t.Fatalf("ParseTenants: %v", err)
	}
	if len(tf.Tenants) != 2 {
		t.Fatalf("got %d tenants, want 2", len(tf.Tenants))
	}
	a, b := tf.Tenants[0], tf.Tenants[1]
	if a.ID != "acme" || a.RequestsPerMinute != 600 || a.TokensPerMinute != 200000 || a.Leaders() != 4 ||
		a.CacheTTL.Duration != 2*time.Hour || a.Caches() || len(a.Models) != 1 ||
		a.StaleWhileRevalidate.Duration != 10*time.Minute || a.StaleIfError.Duration != 24*time.Hour {
		t.Errorf("tenant acme = %+v", a)
	}
	if b.Leaders() != DefaultMaxLeaders || !b.Caches() || b.CacheTTL != nil || b.Models != nil ||
		b.StaleWhileRevalidate != nil || b.StaleIfError != nil {
		t.Errorf("tenant beta_2 defaults = %+v", b)
	}
}

// TestParseTenantsStaleWindowsOff: 0 is an explicit "off", not an error
// (unlike a TTL, which must be positive).
func TestParseTenantsStaleWindowsOff(t *testing.T) {
	tf, err := ParseTenants("t.yaml", []byte("tenants:\n  - id: acme\n"+keyA+"    stale_while_revalidate: 0s\n    stale_if_error: 0s\n"))
	if err != nil {
		t.Fatalf("ParseTenants: %v", err)
	}
	if a := tf.Tenants[0]; a.StaleWhileRevalidate == nil || a.StaleWhileRevalidate.Duration != 0 || a.StaleIfError == nil || a.StaleIfError.Duration != 0 {
		t.Errorf("tenant acme = %+v; want both windows explicitly 0", a)
	}
}

func TestParseTenantsJSON(t *testing.T) {
	tf, err := ParseTenants("t.json", []byte(`{"tenants":[{"id":"acme","keys":[{"sha256":"`+hashA+`"}],"models":["a","b"]}]}`))
	if err != nil {
		t.Fatalf("ParseTenants(JSON): %v", err)
	}
	if tf.Tenants[0].ID != "acme" || len(tf.Tenants[0].Models) != 2 {
		t.Errorf("got %+v", tf.Tenants[0])
	}
}

func TestParseTenantsErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want []string // substrings of the error
	}{
		{
			name: "unknown field",
			give: "tenants:\n  - id: acme\n" + keyA + "    colour: blue\n",
			want: []string{"t.yaml:4", "colour", "unknown field"},
		},
		{
			name: "duplicate id",
			give: "tenants:\n  - id: acme\n" + keyA + "  - id: acme\n    keys: [{sha256: \"" + hashB + "\"}]\n",
			want: []string{"t.yaml:4", "tenants[1].id", "duplicate id"},
		},
		{
			name: "duplicate key hash across tenants",
			give: "tenants:\n  - id: a\n    keys: [{sha256: \"" + hashA + "\"}]\n  - id: b\n    keys:\n      - sha256: \"" + strings.ToUpper(hashA) + "\"\n",
			want: []string{"t.yaml:6", "tenants[1].keys[0].sha256", "duplicate key hash"},
		},
		{
			name: "bad id",
			give: "tenants:\n  - id: Acme Corp\n    keys: [{sha256: \"" + hashA + "\"}]\n",
			want: []string{"t.yaml:2", "tenants[0].id", "bad id"},
		},
		{
			name: "bad duration",
			give: "tenants:\n  - id: acme\n" + keyA + "    cache_ttl: forever\n",
			want: []string{"t.yaml:4", "forever"},
		},
		{
			name: "bad hash",
			give: "tenants:\n  - id: acme\n    keys: [{sha256: \"abc\"}]\n",
			want: []string{"t.yaml:3", "tenants[0].keys[0].sha256", "64 hex"},
		},
		{
			name: "no keys",
			give: "tenants:\n  - id: acme\n",
			want: []string{"tenants[0].keys", "at least one key"},
		},
		{
			name: "negative limit",
			give: "tenants:\n  - id: acme\n" + keyA + "    requests_per_minute: -1\n",
			want: []string{"t.yaml:4", "requests_per_minute"},
		},
		{
			name: "negative stale window",
			give: "tenants:\n  - id: acme\n" + keyA + "    stale_while_revalidate: -1s\n",
			want: []string{"t.yaml:4", "tenants[0].stale_while_revalidate", "0 (off)"},
		},
		{
			name: "bad stale window",
			give: "tenants:\n  - id: acme\n" + keyA + "    stale_if_error: a-day\n",
			want: []string{"t.yaml:4", "tenants[0].stale_if_error", "a-day"},
		},
		{
			name: "zero leaders",
			give: "tenants:\n  - id: acme\n" + keyA + "    max_leaders: 0\n",
			want: []string{"t.yaml:4", "max_leaders"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTenants("t.yaml", []byte(tt.give))
			if err == nil {
				t.Fatal("ParseTenants succeeded; want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// TestParseTenantsDecodeErrors: every kind of mistake the YAML decoder
// catches names the file, the line and the field's path in the file, in
// words an operator reads, never a Go struct.
func TestParseTenantsDecodeErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // the whole error
	}{
		{"empty file", "", "tenants file t.yaml: the file is empty; want a tenants: list (see the README's Tenants file)"},
		{"only comments", "# nothing yet\n\n", "tenants file t.yaml: the file is empty; want a tenants: list (see the README's Tenants file)"},
		{"string for int", "tenants:\n  - id: acme\n" + keyA + "    requests_per_minute: lots\n",
			`tenants file t.yaml:4: tenants[0].requests_per_minute: want a whole number, got "lots"`},
		{"fraction for int", "tenants:\n  - id: acme\n" + keyA + "    max_leaders: 2.5\n",
			"tenants file t.yaml:4: tenants[0].max_leaders: want a whole number, got 2.5"},
		{"string for bool", "tenants:\n  - id: acme\n" + keyA + "    cache: maybe\n",
			`tenants file t.yaml:4: tenants[0].cache: want true or false, got "maybe"`},
		{"list for string", "tenants:\n  - id: [a, b]\n" + keyA,
			"tenants file t.yaml:2: tenants[0].id: want a string, got a list"},
		{"string for list", "tenants:\n  - id: acme\n" + keyA + "    models: gpt-4o\n",
			"tenants file t.yaml:4: tenants[0].models: want a list, got a string"},
		{"mapping for list", "tenants:\n  - id: acme\n    keys: {sha256: \"" + hashA + "\"}\n",
			"tenants file t.yaml:3: tenants[0].keys: want a list, got a mapping (key: value)"},
		{"number for list in JSON", `{"tenants": [{"id": "acme", "keys": 3}]}`,
			"tenants file t.yaml:1: tenants[0].keys: want a list, got a whole number"},
		{"tenants not a list", "tenants: acme\n", "tenants file t.yaml:1: tenants: want a list, got a string"},
		{"unknown field", "tenants:\n  - id: acme\n" + keyA + "    colour: blue\n",
			`tenants file t.yaml:4: tenants[0].colour: unknown field "colour" (a typo? see the README for the fields)`},
		{"unknown key field", "tenants:\n  - id: acme\n    keys:\n      - sha: abc\n",
			`tenants file t.yaml:4: tenants[0].keys[0].sha: unknown field "sha" (a typo? see the README for the fields)`},
		{"second document", "tenants:\n  - id: acme\n" + keyA + "---\ntenants: []\n",
			"tenants file t.yaml:5: more than one YAML document (---); put everything in one"},
		{"bad indentation", "tenants:\n  - id: acme\n   keys: x\n", "tenants file t.yaml:3: YAML syntax: value is not allowed in this context"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTenants("t.yaml", []byte(tt.give))
			if err == nil || err.Error() != tt.want {
				t.Errorf("ParseTenants error\n got %v\nwant %s", err, tt.want)
			}
			var fe *FileError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FileError", err)
			}
		})
	}
}

func TestParseTenantsEmptyList(t *testing.T) {
	for _, give := range []string{"tenants: []\n", "tenants:\n"} {
		tf, err := ParseTenants("t.yaml", []byte(give))
		if err != nil || len(tf.Tenants) != 0 {
			t.Errorf("ParseTenants(%q) = %v, %v; want no tenants and no error", give, tf, err)
		}
	}
}

func TestLoadTenantsMissingFile(t *testing.T) {
	_, err := LoadTenants(t.TempDir() + "/nope.yaml")
	if err == nil || !strings.Contains(err.Error(), "nope.yaml") {
		t.Errorf("LoadTenants(missing) error = %v; want it to name the file", err)
	}
}

// TestParseTenantsDoesNotEchoGarbage: a file that is not a tenants file
// (a key pasted in, a binary, the wrong path) is refused with its name and
// line, never with its bytes, and a bad value is quoted only in part: the
// error reaches logs and admin answers (issue 13, fault 8).
func TestParseTenantsDoesNotEchoGarbage(t *testing.T) {
	tests := []struct {
		name string
		give string
	}{
		{"a bare key", "sk-live-SECRET0123456789"},
		{"a key as the list", "tenants: sk-live-SECRET0123456789\n"},
		{"binary", "\x00\x01\xffSECRET\x7f"},
		{"unknown field that is no field name", "tenants:\n  - id: a\n    SECRET-VALUE: 1\n"},
		{"unclosed flow", "{SECRET: ["},
		{"a key where keys go", "tenants:\n  - id: a\n    keys: sk-SECRET\n"},
		{"a key where a number goes", "tenants:\n  - id: a\n    max_leaders: sk-SECRET\n"},
		{"colons", ":::SECRET:::"},
		{"an env file", "OPENAI_API_KEY=sk-SECRET\nCORRAL_ADMIN_TOKEN=SECRET\n"},
		{"a huge bad id", "tenants:\n  - id: " + strings.Repeat("SECRET", 100) + "\n" + keyA},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTenants("t.yaml", []byte(tt.give))
			if err == nil {
				t.Fatal("ParseTenants succeeded; want an error")
			}
			msg := err.Error()
			if len(msg) > 160 || strings.Contains(msg, "sk-") || strings.Contains(msg, "SECRET-") ||
				strings.Contains(msg, "SECRET\x7f") || strings.Contains(msg, "SECRET:") || strings.ContainsAny(msg, "\x00\x01\xff") {
				t.Errorf("error echoes the file: %q", msg)
			}
			if !strings.Contains(msg, "t.yaml") {
				t.Errorf("error %q does not name the file", msg)
			}
		})
	}
}
