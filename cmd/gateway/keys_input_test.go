package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

// spoofingNames are key names that would display as something else in
// the console and `gateway keys list`: bidi overrides and isolates, marks,
// zero-width and other format characters, C0 and C1 controls.
var spoofingNames = []struct{ what, name string }{
	{"right-to-left override", "ci\u202Eyek-dor"},
	{"left-to-right override", "\u202Dci"},
	{"right-to-left embedding", "ci\u202B"},
	{"pop directional formatting", "ci\u202C"},
	{"left-to-right mark", "ci\u200E"},
	{"right-to-left mark", "ci\u200F"},
	{"left-to-right isolate", "\u2066ci\u2069"},
	{"right-to-left isolate", "\u2067ci"},
	{"first strong isolate", "\u2068ci"},
	{"arabic letter mark", "ci\u061C"},
	{"zero width space", "c\u200Bi"},
	{"byte order mark", "\uFEFFci"},
	{"line separator", "ci\u2028prod"},
	{"C0 newline", "ci\nprod"},
	{"C0 escape", "ci\x1b[31m"},
	{"DEL", "ci\x7f"},
	{"C1 next line", "ci\u0085prod"},
	{"C1 control sequence introducer", "ci\u009b31m"},
}

// TestKeyNameRefusesSpoofingCharacters: each such name is 400 naming
// "name" through the admin API and the console's form, and no key is
// made; plain names in any script are accepted.
func TestKeyNameRefusesSpoofingCharacters(t *testing.T) {
	base := consoleGateways(t, 1, mockllm.Options{})[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"names"}`)
	ck := consoleSignIn(t, base)
	for _, tt := range spoofingNames {
		body, _ := json.Marshal(map[string]string{"name": tt.name})
		if code, out := adminCall(t, base, "POST", "/admin/tenants/names/keys", string(body)); code != http.StatusBadRequest || errParam(out) != "name" {
			t.Errorf("admin API, %s: %d %v; want 400 naming name", tt.what, code, out)
		}
		req, _ := http.NewRequest(http.MethodPost, base+"/console/tenants/names/keys", strings.NewReader(url.Values{"name": {tt.name}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", base)
		req.AddCookie(&http.Cookie{Name: "corral_console", Value: ck})
		if resp, out := consoleDo(t, req); resp.StatusCode != http.StatusBadRequest || !strings.Contains(out, "name") {
			t.Errorf("console form, %s: %d; want 400 naming name", tt.what, resp.StatusCode)
		}
	}
	if n := len(mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/names/keys", "")["keys"].([]any)); n != 0 {
		t.Errorf("%d keys made from refused names; want 0", n)
	}
	for _, name := range []string{"ci", "déploiement", "ключ", "مفتاح", "鍵 2027", "ci-2026_12 (rotated)"} {
		body, _ := json.Marshal(map[string]string{"name": name})
		if code, out := adminCall(t, base, "POST", "/admin/tenants/names/keys", string(body)); code != http.StatusCreated {
			t.Errorf("plain name %q: %d %v; want 201", name, code, out)
		}
	}
}

// TestKeyExpiryFarAhead: an expires_at past 2262-04-11 (where Unix
// nanoseconds overflow) up to the last second of year 9999 makes a key
// that works; a later one, which RFC 3339 cannot write, is 400 naming
// expires_at, and no key is made.
func TestKeyExpiryFarAhead(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	base := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir())).URL
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"far"}`)
	for _, exp := range []string{"2262-04-12T00:00:00Z", "3000-01-01T00:00:00Z", "9999-12-31T23:59:59Z"} {
		key, _ := newKeyOn(t, base, "far", `{"expires_at":"`+exp+`"}`)
		if code := chatCode(t, base, key, "far ahead "+exp); code != 200 {
			t.Errorf("key expiring %s: %d; want 200", exp, code)
		}
	}
	for _, exp := range []string{`"10000-01-01T00:00:00Z"`, `"9999-12-31T23:59:59-01:00"`} {
		if code, out := adminCall(t, base, "POST", "/admin/tenants/far/keys", `{"expires_at":`+exp+`}`); code != http.StatusBadRequest || errParam(out) != "expires_at" {
			t.Errorf("expires_at %s: %d %v; want 400 naming expires_at", exp, code, out)
		}
	}
	keys := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/far/keys", "")["keys"].([]any)
	if len(keys) != 3 {
		t.Errorf("%d keys; want the 3 accepted", len(keys))
	}
	for _, k := range keys {
		if e := k.(map[string]any)["expires_at"]; !strings.HasPrefix(fmt.Sprint(e), "2262-04-12") && !strings.HasPrefix(fmt.Sprint(e), "3000") && !strings.HasPrefix(fmt.Sprint(e), "9999") {
			t.Errorf("listed expires_at %v", e)
		}
	}
}
