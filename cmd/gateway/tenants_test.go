package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// The admin API's tenants and keys, end to end: real gateways wired from
// their environment, a real redis-server, the mock model.

// adminCall sends one admin request with the token "adm" and decodes the
// JSON answer.
func adminCall(t *testing.T, base, method, path, body string) (int, map[string]any) {
	t.Helper()
	return adminCallWith(t, base, "adm", method, path, body)
}

// adminCallWith is adminCall with the admin token token.
func adminCallWith(t *testing.T, base, token, method, path, body string) (int, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, method, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, raw, err)
		}
	}
	return resp.StatusCode, out
}

// mustAdmin is adminCall that fails the test unless the status is want.
func mustAdmin(t *testing.T, want int, base, method, path, body string) map[string]any {
	t.Helper()
	code, out := adminCall(t, base, method, path, body)
	if code != want {
		t.Fatalf("%s %s %s = %d %v; want %d", method, path, body, code, out, want)
	}
	return out
}

// newKeyOn creates a key for tenant id through base and returns the key
// and its id.
func newKeyOn(t *testing.T, base, id, body string) (key, keyID string) {
	t.Helper()
	out := mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants/"+id+"/keys", body)
	return out["key"].(string), out["id"].(string)
}

func errCode(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	c, _ := e["code"].(string)
	return c
}

func errParam(out map[string]any) string {
	e, _ := out["error"].(map[string]any)
	p, _ := e["param"].(string)
	return p
}

// within polls check until it holds or d has passed.
func within(t *testing.T, d time.Duration, what string, check func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !check() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline, not waiting for an event
	}
}

func chatCode(t *testing.T, base, key, text string) int {
	t.Helper()
	code, _, err := postChat(base, key, text)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// TestAPITenantsAcrossInstances: a tenant created on A, with a key made on
// B, answers on C within 1 s; the key revoked on C is 401 on A and B
// within 1 s.
func TestAPITenantsAcrossInstances(t *testing.T) {
	rs := redistest.Start(t)
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 3)
	a, b, c := bases[0], bases[1], bases[2]

	created := mustAdmin(t, http.StatusCreated, a, "POST", "/admin/tenants", `{"id":"team-x","requests_per_minute":600}`)
	if created["source"] != "api" || created["id"] != "team-x" {
		t.Errorf("created = %v", created)
	}
	key, keyID := newKeyOn(t, b, "team-x", `{"name":"ci"}`)
	if !strings.HasPrefix(key, "sk-corral-") || !strings.HasPrefix(keyID, "key_") {
		t.Errorf("key %q id %q", key[:12], keyID)
	}
	within(t, time.Second, "the key made on B answers on C", func() bool { return chatCode(t, c, key, "hello") == 200 })
	for _, base := range bases {
		if code := chatCode(t, base, key, "hello"); code != 200 {
			t.Errorf("%s: %d with the new key", base, code)
		}
	}
	mustAdmin(t, http.StatusOK, c, "DELETE", "/admin/tenants/team-x/keys/"+keyID, "")
	for _, base := range []string{a, b} {
		within(t, time.Second, "the key revoked on C is 401 on "+base, func() bool { return chatCode(t, base, key, "hello") == 401 })
	}
	if code := chatCode(t, c, key, "hello"); code != 401 {
		t.Errorf("revoking instance answers %d with the revoked key", code)
	}
	// Every instance lists the tenant, its key gone.
	for _, base := range bases {
		got := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/team-x", "")
		if keys := got["keys"].([]any); len(keys) != 0 {
			t.Errorf("%s lists keys %v after the revoke", base, keys)
		}
	}
}

// TestAPIKeyExpiresOnTheSecond: a key with expires_at works until that
// instant and is 401 from it on (the clock injected).
func TestAPIKeyExpiresOnTheSecond(t *testing.T) {
	// The clock reads the real time until the test sets an instant, then
	// stands still there: a moving clock would let the request's own
	// latency carry "a millisecond before" past the expiry.
	var at atomic.Int64
	now := func() time.Time {
		if n := at.Load(); n != 0 {
			return time.Unix(0, n)
		}
		return time.Now()
	}
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, wireGateway(t, gatewayOptions{Now: now},
		"CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	mustAdmin(t, http.StatusCreated, gw.URL, "POST", "/admin/tenants", `{"id":"temp"}`)
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	key, _ := newKeyOn(t, gw.URL, "temp", `{"expires_at":"`+exp.Format(time.RFC3339)+`"}`)
	at.Store(exp.Add(-time.Millisecond).UnixNano())
	if code := chatCode(t, gw.URL, key, "a"); code != 200 {
		t.Fatalf("a millisecond before expiry: %d", code)
	}
	at.Store(exp.UnixNano())
	if code := chatCode(t, gw.URL, key, "a"); code != 401 {
		t.Fatalf("at expiry: %d; want 401", code)
	}
}

// TestFileAndAPITenants: a file tenant and an API tenant side by side; the
// file's tenant is read-only through the API and its id cannot be taken;
// a reload of the file keeps the API tenants.
func TestFileAndAPITenants(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-file-acme"), "requests_per_minute: 50"))
	gw := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_TENANTS_FILE="+file, "CORRAL_DATA_DIR="+t.TempDir()))
	base := gw.URL
	for _, tt := range []struct{ method, path, body string }{
		{"POST", "/admin/tenants", `{"id":"acme"}`},
		{"PATCH", "/admin/tenants/acme", `{"requests_per_minute":1}`},
		{"DELETE", "/admin/tenants/acme", ``},
		{"POST", "/admin/tenants/acme/keys", `{}`},
		{"GET", "/admin/tenants/acme/keys", ``},
	} {
		code, out := adminCall(t, base, tt.method, tt.path, tt.body)
		if code != http.StatusConflict || errCode(out) != "tenant_managed_by_file" {
			t.Errorf("%s %s = %d %v; want 409 tenant_managed_by_file", tt.method, tt.path, code, out)
		}
	}
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"beta","models":["gpt-4o-mini"]}`)
	if code, out := adminCall(t, base, "POST", "/admin/tenants", `{"id":"beta"}`); code != http.StatusConflict || errCode(out) != "tenant_exists" {
		t.Errorf("second create = %d %v; want 409 tenant_exists", code, out)
	}
	key, _ := newKeyOn(t, base, "beta", "")
	list := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants", "")
	var got []string
	for _, x := range list["tenants"].([]any) {
		m := x.(map[string]any)
		got = append(got, fmt.Sprintf("%s:%s:%v", m["id"], m["source"], m["policy"].(map[string]any)["requests_per_minute"]))
	}
	if want := "acme:file:50 beta:api:<nil>"; strings.Join(got, " ") != want {
		t.Errorf("tenants = %v; want %s", got, want)
	}
	mustAdmin(t, http.StatusOK, base, "POST", "/admin/reload", "")
	if code := chatCode(t, base, key, "after reload"); code != 200 {
		t.Errorf("API key after a reload: %d", code)
	}
	if code := chatCode(t, base, "sk-file-acme", "after reload"); code != 200 {
		t.Errorf("file key after a reload: %d", code)
	}
}

// TestAdminBadInput: each refusal is 400 naming the field (none for a body over 64 KiB),
// and changes nothing: the audit trail is as long as before.
func TestAdminBadInput(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	base := gw.URL
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"acme","cache_ttl":"1h"}`)
	_, keyID := newKeyOn(t, base, "acme", "")
	tests := []struct {
		method, path, body string
		wantCode           int
		wantParam          string
	}{
		{"POST", "/admin/tenants", `{"id":"ok","colour":"red"}`, 400, "colour"},
		{"POST", "/admin/tenants", `{"id":"Bad Id"}`, 400, "id"},
		{"POST", "/admin/tenants", `{"id":"ok","requests_per_minute":-1}`, 400, "requests_per_minute"},
		{"POST", "/admin/tenants", `{"id":"ok","cache_ttl":"ten minutes"}`, 400, "cache_ttl"},
		{"POST", "/admin/tenants", `{"id":"ok","keys":[]}`, 400, "keys"},
		{"POST", "/admin/tenants", `[1,2]`, 400, ""},
		{"POST", "/admin/tenants", `{"id":"ok","models":["` + strings.Repeat("m", 70<<10) + `"]}`, 400, ""},
		{"POST", "/admin/tenants/acme/keys", `{"name":"` + strings.Repeat("n", 70<<10) + `"}`, 400, ""},
		{"PATCH", "/admin/tenants/acme", `{"models":["` + strings.Repeat("m", 70<<10) + `"]}`, 400, ""},
		{"PATCH", "/admin/tenants/acme", `{"tokens_per_minute":-5}`, 400, "tokens_per_minute"},
		{"PATCH", "/admin/tenants/acme", `{"max_leaders":0}`, 400, "max_leaders"},
		{"PATCH", "/admin/tenants/acme", `{"id":"other"}`, 400, "id"},
		{"PATCH", "/admin/tenants/nobody", `{"cache":false}`, 404, "tenant"},
		{"POST", "/admin/tenants/acme/keys", `{"expires_at":"2001-01-01T00:00:00Z"}`, 400, "expires_at"},
		{"POST", "/admin/tenants/acme/keys", `{"expires_at":"tomorrow"}`, 400, "expires_at"},
		{"POST", "/admin/tenants/acme/keys", `{"scope":"all"}`, 400, "scope"},
		{"POST", "/admin/tenants/acme/keys", `{"name":"sk-corral-pasted-key"}`, 400, "name"},
		{"POST", "/admin/tenants/nobody/keys", `{}`, 404, "tenant"},
		{"DELETE", "/admin/tenants/acme/keys/key_nope", ``, 400, "key_id"},
		{"DELETE", "/admin/tenants/acme/keys/key_000000000000000000000000", ``, 404, "key_id"},
		{"DELETE", "/admin/tenants/nobody", ``, 404, "tenant"},
		{"GET", "/admin/audit?limit=-1", ``, 400, "limit"},
		{"GET", "/admin/audit?limit=abc", ``, 400, "limit"},
		{"GET", "/admin/audit?limit=10001", ``, 400, "limit"},
	}
	before := len(mustAdmin(t, 200, base, "GET", "/admin/audit?limit=10000", "")["events"].([]any))
	for _, tt := range tests {
		code, out := adminCall(t, base, tt.method, tt.path, tt.body)
		if code != tt.wantCode || errParam(out) != tt.wantParam {
			t.Errorf("%s %s %.60s = %d %v; want %d naming %q", tt.method, tt.path, tt.body, code, out, tt.wantCode, tt.wantParam)
		}
	}
	if after := len(mustAdmin(t, 200, base, "GET", "/admin/audit?limit=10000", "")["events"].([]any)); after != before {
		t.Errorf("refused changes were audited: %d events, %d before", after, before)
	}
	got := mustAdmin(t, 200, base, "GET", "/admin/tenants/acme", "")
	if p := got["policy"].(map[string]any); len(p) != 1 || p["cache_ttl"] != "1h" || got["version"].(float64) != 2 {
		t.Errorf("tenant after refused changes: %v", got)
	}
	if keys := got["keys"].([]any); len(keys) != 1 || keys[0] != keyID {
		t.Errorf("keys after refused changes: %v", keys)
	}
}

// TestFiftyKeysAtOnce: 50 keys made at once for one tenant are 50
// distinct keys, and all of them work.
func TestFiftyKeysAtOnce(t *testing.T) {
	rs := redistest.Start(t)
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 2)
	mustAdmin(t, http.StatusCreated, bases[0], "POST", "/admin/tenants", `{"id":"many"}`)
	keys := make([]string, 50)
	var wg sync.WaitGroup
	for i := range keys {
		wg.Go(func() { keys[i], _ = newKeyOn(t, bases[i%2], "many", fmt.Sprintf(`{"name":"k%d"}`, i)) })
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, k := range keys {
		seen[k] = true
	}
	if len(seen) != 50 {
		t.Fatalf("%d distinct keys of 50", len(seen))
	}
	list := mustAdmin(t, http.StatusOK, bases[1], "GET", "/admin/tenants/many/keys", "")
	if n := len(list["keys"].([]any)); n != 50 {
		t.Errorf("listing has %d keys; want 50", n)
	}
	for i, k := range keys {
		within(t, time.Second, "key works", func() bool { return chatCode(t, bases[(i+1)%2], k, "hi") == 200 })
	}
}

// TestConcurrentPatchesOfOneTenant: 20 PATCHes at once, over two
// instances, each setting one field: every field lands.
func TestConcurrentPatchesOfOneTenant(t *testing.T) {
	rs := redistest.Start(t)
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 2)
	mustAdmin(t, http.StatusCreated, bases[0], "POST", "/admin/tenants", `{"id":"busy"}`)
	fields := []string{`"requests_per_minute":%d`, `"tokens_per_minute":%d`, `"max_leaders":%d`, `"models":["m%d"]`,
		`"cache_ttl":"%dm"`, `"negative_ttl":"%ds"`, `"stale_while_revalidate":"%ds"`, `"stale_if_error":"%ds"`,
		`"cache":false`, `"stored_objects":"deny"`}
	var patches []string
	for i, f := range fields {
		v := f
		if strings.Contains(f, "%d") {
			v = fmt.Sprintf(f, i+1)
		}
		patches = append(patches, "{"+v+"}", "{"+v+"}")
	}
	codes := startBurst(len(patches), func(i int) int {
		code, _ := adminCall(t, bases[i%2], "PATCH", "/admin/tenants/busy", patches[i])
		return code
	})()
	for i, c := range codes {
		if c != 200 {
			t.Errorf("PATCH %s = %d", patches[i], c)
		}
	}
	got := mustAdmin(t, http.StatusOK, bases[1], "GET", "/admin/tenants/busy", "")
	if p := got["policy"].(map[string]any); len(p) != len(fields) {
		t.Errorf("policy has %d of %d fields: %v", len(p), len(fields), p)
	}
	if v := got["version"].(float64); v != float64(1+len(patches)) {
		t.Errorf("version %v after %d patches", v, len(patches))
	}
}

// TestDeleteTenantPurgesItsCache: a deleted tenant's keys stop working
// and its cache is gone: the same id created again answers MISS. A key's
// last use shows in the listing, to the minute.
func TestDeleteTenantPurgesItsCache(t *testing.T) {
	rs := redistest.Start(t)
	base := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 1)[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"gone"}`)
	key, _ := newKeyOn(t, base, "gone", "")
	for _, want := range []string{"MISS", "HIT"} {
		if code, cache, err := postChat(base, key, "purge me"); code != 200 || cache != want || err != nil {
			t.Fatalf("%d %s %v; want 200 %s", code, cache, err, want)
		}
	}
	keys := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/gone/keys", "")["keys"].([]any)
	used, _ := time.Parse(time.RFC3339, fmt.Sprint(keys[0].(map[string]any)["last_used"]))
	created, _ := time.Parse(time.RFC3339, fmt.Sprint(keys[0].(map[string]any)["created_at"]))
	if since := time.Since(used); since < 0 || since > 2*time.Minute || (used.Second() != 0 && !used.Equal(created)) {
		t.Errorf("last_used = %v; want this minute (or created_at %v, when made this minute)", keys[0].(map[string]any)["last_used"], created)
	}
	out := mustAdmin(t, http.StatusOK, base, "DELETE", "/admin/tenants/gone", "")
	if out["cache_purged"] != true || out["purged"].(float64) < 1 {
		t.Errorf("DELETE = %v; want the cache purged", out)
	}
	if code := chatCode(t, base, key, "purge me"); code != 401 {
		t.Errorf("deleted tenant's key: %d", code)
	}
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"gone"}`)
	key2, _ := newKeyOn(t, base, "gone", "")
	if code, cache, _ := postChat(base, key2, "purge me"); code != 200 || cache != "MISS" {
		t.Errorf("recreated tenant: %d %s; want a MISS (the cache was purged)", code, cache)
	}
}

// TestKeyLastUsedNeverBeforeCreated: a key made at 12:00:30 and used at
// 12:00:45 was last used no earlier than it was made, though uses are kept
// to the minute (12:00): the listing shows its creation then, and a use in
// a later minute as that minute.
func TestKeyLastUsedNeverBeforeCreated(t *testing.T) {
	var at atomic.Int64
	at.Store(time.Date(2026, 12, 1, 12, 0, 30, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, at.Load()) }
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, wireGateway(t, gatewayOptions{Now: now},
		"CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	mustAdmin(t, http.StatusCreated, gw.URL, "POST", "/admin/tenants", `{"id":"fresh"}`)
	key, _ := newKeyOn(t, gw.URL, "fresh", "")
	lastUsed := func() (created, used string) {
		t.Helper()
		k := mustAdmin(t, http.StatusOK, gw.URL, "GET", "/admin/tenants/fresh/keys", "")["keys"].([]any)[0].(map[string]any)
		return fmt.Sprint(k["created_at"]), fmt.Sprint(k["last_used"])
	}
	at.Add(int64(15 * time.Second)) // 12:00:45
	if code := chatCode(t, gw.URL, key, "first"); code != 200 {
		t.Fatalf("chat: %d", code)
	}
	if created, used := lastUsed(); created != "2026-12-01T12:00:30Z" || used != created {
		t.Errorf("created_at %s, last_used %s; want last_used = created_at 2026-12-01T12:00:30Z", created, used)
	}
	at.Add(int64(time.Minute)) // 12:01:45
	if code := chatCode(t, gw.URL, key, "second"); code != 200 {
		t.Fatalf("chat: %d", code)
	}
	if _, used := lastUsed(); used != "2026-12-01T12:01:00Z" {
		t.Errorf("last_used %s; want 2026-12-01T12:01:00Z", used)
	}
}
