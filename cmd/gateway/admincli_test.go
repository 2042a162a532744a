package main

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

// TestTenantsAndKeysSubcommands drives a real gateway's admin API with the
// subcommands: create a tenant, make a key that works, list, rotate
// (second key, revoke the first), delete.
func TestTenantsAndKeysSubcommands(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	env := []string{"CORRAL_ADMIN_URL=" + gw.URL, "CORRAL_ADMIN_TOKEN=adm"}
	cli := func(args ...string) string {
		t.Helper()
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, env, &out, &errOut); err != nil {
			t.Fatalf("gateway %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return out.String()
	}
	keyLine := regexp.MustCompile(`(?m)^id:\s+(key_\w+)\nkey:\s+(sk-corral-\S+)$`)

	cli("tenants", "create", "-policy", `{"requests_per_minute":600}`, "team-cli")
	if got := cli("tenants", "list"); !strings.Contains(got, "team-cli") || !strings.Contains(got, `"requests_per_minute":600`) {
		t.Errorf("tenants list:\n%s", got)
	}
	m := keyLine.FindStringSubmatch(cli("keys", "create", "-name", "ci", "-expires", "720h", "team-cli"))
	if m == nil {
		t.Fatal("keys create printed no id and key")
	}
	oldID, oldKey := m[1], m[2]
	if code := chatCode(t, gw.URL, oldKey, "cli"); code != 200 {
		t.Fatalf("the CLI's key: %d", code)
	}
	m = keyLine.FindStringSubmatch(cli("keys", "create", "-name", "ci-2", "team-cli"))
	newKey := m[2]
	list := cli("keys", "list", "team-cli")
	if !strings.Contains(list, oldID) || !strings.Contains(list, "ci-2") || strings.Contains(list, oldKey) {
		t.Errorf("keys list:\n%s", list)
	}
	cli("keys", "revoke", "team-cli", oldID)
	if chatCode(t, gw.URL, oldKey, "cli") != 401 || chatCode(t, gw.URL, newKey, "cli") != 200 {
		t.Error("after the rotation the old key must be 401 and the new one work")
	}
	cli("tenants", "delete", "team-cli")
	if code := chatCode(t, gw.URL, newKey, "cli"); code != http.StatusUnauthorized {
		t.Errorf("key of a deleted tenant: %d", code)
	}

	// Refusals carry the gateway's message; -h is help, not an error.
	var out, errOut bytes.Buffer
	err := run(context.Background(), []string{"tenants", "create", "-policy", `{"colour":1}`, "x"}, env, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("bad policy: %v", err)
	}
	for _, args := range [][]string{{"tenants", "-h"}, {"tenants", "list", "-h"}, {"tenants", "create", "-h"}, {"tenants", "delete", "-h"},
		{"keys", "-h"}, {"keys", "create", "-h"}, {"keys", "list", "-h"}, {"keys", "revoke", "-h"}} {
		errOut.Reset()
		if err := run(context.Background(), args, env, &out, &errOut); err != nil || !strings.Contains(errOut.String(), "usage: gateway") {
			t.Errorf("gateway %s: %v, %q", strings.Join(args, " "), err, errOut.String())
		}
	}
	if err := run(context.Background(), []string{"keys", "list", "x"}, []string{"CORRAL_ADMIN_URL=" + gw.URL}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "CORRAL_ADMIN_TOKEN") {
		t.Errorf("without a token: %v", err)
	}
	var help bytes.Buffer
	if err := run(context.Background(), []string{"help"}, nil, &help, &errOut); err != nil || !strings.Contains(help.String(), "gateway tenants") || !strings.Contains(help.String(), "gateway keys") {
		t.Errorf("gateway help does not list tenants and keys: %v", err)
	}
}

// TestTenantsListCountsFileKeys: the demo tenant (a tenant not made
// through the API, like the file's) takes sk-corral-demo, so `gateway
// tenants list` shows its one key, as GET /admin/tenants lists it by id.
func TestTenantsListCountsFileKeys(t *testing.T) {
	gw := serveGateway(t, wireGateway(t, gatewayOptions{Demo: true}, "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	if code := chatCode(t, gw.URL, DemoKey, "demo"); code != 200 {
		t.Fatalf("the demo key: %d", code)
	}
	list := mustAdmin(t, http.StatusOK, gw.URL, "GET", "/admin/tenants/"+DemoTenant, "")
	if keys, _ := list["keys"].([]any); len(keys) != 1 || keys[0] != "file_1" {
		t.Errorf("GET /admin/tenants/demo keys = %v; want [file_1]", list["keys"])
	}
	var out, errOut bytes.Buffer
	env := []string{"CORRAL_ADMIN_URL=" + gw.URL, "CORRAL_ADMIN_TOKEN=adm"}
	if err := run(context.Background(), []string{"tenants", "list"}, env, &out, &errOut); err != nil {
		t.Fatalf("tenants list: %v\n%s", err, errOut.String())
	}
	if !regexp.MustCompile(`(?m)^demo\s+file\s+1\s`).MatchString(out.String()) {
		t.Errorf("tenants list does not show the demo tenant's one key:\n%s", out.String())
	}
}
