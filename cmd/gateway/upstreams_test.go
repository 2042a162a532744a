package main

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/tenant"
)

// TestUpstreamsFileAndReload wires the gateway from an upstreams file, then
// reloads it: a good file moves traffic to the new upstream, a bad one is
// refused with file, line and field and the running set keeps serving.
func TestUpstreamsFileAndReload(t *testing.T) {
	seen := map[string]chan string{}
	up := func(name string) *httptest.Server {
		ch := make(chan string, 16)
		seen[name] = ch
		mock := mockllm.New(mockllm.Options{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			ch <- r.Header.Get("Authorization")
			mock.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := up("a"), up("b")
	dir := t.TempDir()
	tenants := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-t")))
	file := filepath.Join(dir, "upstreams.yaml")
	write := func(body string) { writeFile(t, file, body) }
	write("upstreams:\n  - name: a\n    url: " + a.URL + "/v1\n    api_key_env: KEY_A\n")
	environ := []string{"CORRAL_TENANTS_FILE=" + tenants, "CORRAL_UPSTREAMS_FILE=" + file, "CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_UPSTREAM_URL=http://127.0.0.1:1/v1", "CORRAL_DATA_DIR=" + filepath.Join(dir, "data")}
	var logs logtest.Buffer
	keys := map[string]string{"KEY_A": "sk-upstream-a", "KEY_B": "sk-upstream-b"}
	gw := wireGateway(t, gatewayOptions{
		Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
		Getenv: func(k string) (string, bool) {
			if v, ok := keys[k]; ok {
				return v, true
			}
			return lookupIn(environ)(k)
		},
	}, environ...)
	srv := serveGateway(t, gw)
	chat := func(text string) (int, string, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Authorization", "Bearer sk-t")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if p := resp.Header.Get("X-Corral-Provider"); p != "openai" {
			t.Errorf("X-Corral-Provider = %q; want openai", p)
		}
		return resp.StatusCode, resp.Header.Get("X-Corral-Upstream"), string(body)
	}
	reload := func() (int, string) {
		req, _ := http.NewRequest("POST", srv.URL+"/admin/reload", nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	if code, by, body := chat("one"); code != 200 || by != "a" || <-seen["a"] != "Bearer sk-upstream-a" {
		t.Fatalf("before reload: %d by %q %s", code, by, body)
	}
	write("upstreams:\n  - name: b\n    url: " + b.URL + "/v1\n    api_key_env: KEY_B\n")
	if code, body := reload(); code != 200 {
		t.Fatalf("good reload: %d %s", code, body)
	}
	if code, by, _ := chat("two"); code != 200 || by != "b" || <-seen["b"] != "Bearer sk-upstream-b" {
		t.Fatalf("after reload: %d by %q", code, by)
	}
	// What the running set is shows in /readyz and /metrics: the new
	// upstream, its API and provider.
	if got, want := getBody(t, srv.URL+"/readyz", ""), `"upstreams":[{"name":"b","api":"openai","provider":"openai","state":"closed"}]`; !strings.Contains(got, want) {
		t.Errorf("/readyz after reload = %s; want %s", got, want)
	}
	if got, want := getBody(t, srv.URL+"/metrics", "adm"), `corral_upstream_info{api="openai",provider="openai",upstream="b"} 1`; !strings.Contains(got, want) || strings.Contains(got, `corral_upstream_info{api="openai",provider="openai",upstream="a"}`) {
		t.Errorf("/metrics after reload: want %s and no info series of a", want)
	}
	write("upstreams:\n  - name: c\n    url: " + b.URL + "/v1\n    api_key_env: KEY_MISSING\n")
	code, body := reload()
	if code != 400 || !strings.Contains(body, "upstreams.yaml:4: upstreams[0].api_key_env: the environment variable KEY_MISSING is not set") {
		t.Fatalf("bad reload: %d %s", code, body)
	}
	if code, by, _ := chat("three"); code != 200 || by != "b" {
		t.Errorf("after a refused reload: %d by %q; want the running set (b)", code, by)
	}
	out := logs.String()
	if !strings.Contains(out, "CORRAL_UPSTREAM_URL and CORRAL_UPSTREAM_API_KEY are ignored") {
		t.Errorf("no warning that CORRAL_UPSTREAM_URL is ignored:\n%s", out)
	}
	for _, k := range keys {
		if strings.Contains(out, k) || strings.Contains(body, k) {
			t.Errorf("an upstream key reached the logs or an answer")
		}
	}
}

// getBody GETs url (with the admin token when it is not "") and returns
// the body of its 200.
func getBody(t *testing.T, url, token string) string {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body)
}
