package main

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/mockllm"
)

// TestEmbeddedSignOutSurvivesRestart: in embedded mode a console sign-out
// is kept in the data dir, so the signed-out cookie stays refused after
// the gateway process is killed and started again on the same directory,
// while a session that never signed out still works.
func TestEmbeddedSignOutSurvivesRestart(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	data := filepath.Join(t.TempDir(), "data")
	env := []string{"CORRAL_UPSTREAM_URL=" + up.URL + "/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR=" + data}
	bin := buildGateway(t)

	base, cmd := startGateway(t, bin, env)
	out, kept := consoleSignIn(t, base), consoleSignIn(t, base)
	req, _ := http.NewRequest(http.MethodPost, base+"/console/logout", nil)
	req.AddCookie(&http.Cookie{Name: console.CookieName, Value: out})
	req.Header.Set("Origin", base)
	if resp, _ := consoleDo(t, req); resp.StatusCode != http.StatusOK {
		t.Fatalf("sign-out: %d", resp.StatusCode)
	}
	if resp, _ := consoleGet(t, base, "/console/", out); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the signed-out cookie before the restart: %d; want 303 to the sign-in", resp.StatusCode)
	}
	_ = cmd.Process.Kill()
	_, _ = cmd.Process.Wait()
	if _, err := os.Stat(filepath.Join(data, console.BoltFile)); err != nil {
		t.Fatalf("no sessions file in the data dir: %v", err)
	}

	base, _ = startGateway(t, bin, env)
	resp, _ := consoleGet(t, base, "/console/", out)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
		t.Errorf("the signed-out cookie after a restart: %d to %q; want 303 to the sign-in", resp.StatusCode, resp.Header.Get("Location"))
	}
	if resp, _ := consoleGet(t, base, "/console/", kept); resp.StatusCode != http.StatusOK {
		t.Errorf("a session never signed out, after a restart: %d; want 200", resp.StatusCode)
	}
}
