package main

import (
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/provider/azure/azuretest"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// The set-up of the Azure OpenAI tests (clouds_azure_test.go): real
// gateway processes on one real redis-server in front of azuretest's fake
// resource and Entra ID (both over TLS; the processes trust the fake's
// certificate through SSL_CERT_FILE, as azidentity offers no other way
// from the default chain), their logs captured to be scanned for secrets.

// startAzureGateway runs bin with env, its output captured at debug level
// (the most a log ever says), and waits until it answers.
func startAzureGateway(t *testing.T, bin string, env []string) (string, *logtest.Buffer, *exec.Cmd) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	logs := &logtest.Buffer{}
	cmd := exec.Command(bin)
	cmd.Env = append(append(os.Environ(), env...), "CORRAL_ADDR="+addr, "CORRAL_LOG_LEVEL=debug")
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // an error once stopped
	})
	base := "http://" + addr
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get(base + "/healthz")
		if err == nil {
			resp.Body.Close()
			return base, logs, cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("gateway at %s never answered: %v\n%s", addr, err, logs)
		}
		time.Sleep(20 * time.Millisecond) // a starting process gives no readiness event
	}
}

// azureEnv is one Azure scenario: the fake, the redis-server, and the
// environment its gateways share.
type azureEnv struct {
	fake  *azuretest.Server
	redis *redistest.Server
	env   []string
	logs  []*logtest.Buffer
	cmds  []*exec.Cmd
	bases []string
}

const azureAdmin = "adm-azure"

// newAzureEnv writes the tenants (a: sk-az-a, b: sk-az-b) and the
// upstreams file and starts n gateways with env.
func newAzureEnv(t *testing.T, bin string, rs *redistest.Server, fake *azuretest.Server, upstreams string, n int, env ...string) *azureEnv {
	t.Helper()
	dir := t.TempDir()
	e := &azureEnv{fake: fake, redis: rs}
	e.env = append([]string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_TENANTS_FILE=" + writeTenantsFile(t, tenantYAML("a", tenant.HashKey("sk-az-a")), tenantYAML("b", tenant.HashKey("sk-az-b"))),
		"CORRAL_UPSTREAMS_FILE=" + writeFile(t, filepath.Join(dir, "upstreams.yaml"), "upstreams:\n"+upstreams),
		"CORRAL_ADMIN_TOKEN=" + azureAdmin,
		"SSL_CERT_FILE=" + fake.WriteCert(t),
		"AZURE_TEST_KEY=" + fake.Options().APIKey,
	}, env...)
	for range n {
		base, logs, cmd := startAzureGateway(t, bin, e.env)
		e.bases = append(e.bases, base)
		e.logs = append(e.logs, logs)
		e.cmds = append(e.cmds, cmd)
	}
	return e
}

// checkNoSecrets scans every gateway's /metrics, every Redis key and
// value and, once the gateways have shut down (their log lines are
// written asynchronously, all of them by exit), every log line for the
// secrets.
func (e *azureEnv) checkNoSecrets(t *testing.T, secrets ...string) {
	t.Helper()
	var places []string
	for _, b := range e.bases {
		req, _ := http.NewRequest(http.MethodGet, b+"/metrics", nil)
		req.Header.Set("Authorization", "Bearer "+azureAdmin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		m, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(m), "azure") {
			t.Errorf("/metrics = %d, %d bytes, no azure upstream named", resp.StatusCode, len(m))
		}
		places = append(places, "metrics\n"+string(m))
	}
	places = append(places, "redis\n"+e.redis.Dump())
	for _, c := range e.cmds {
		_ = c.Process.Signal(syscall.SIGTERM)
		_ = c.Wait() // the exit status of a stopped gateway says nothing here
	}
	for i, l := range e.logs {
		// The capture works: every gateway logged its Azure upstream and
		// its requests.
		if !strings.Contains(l.String(), `"name":"azure-`) || !strings.Contains(l.String(), `"path":"/v1/`) {
			t.Errorf("gateway %d logged no Azure call:\n%.3000s", i, l)
		}
		places = append(places, "log of gateway "+string(rune('0'+i))+"\n"+l.String())
	}
	for _, p := range places {
		for _, s := range secrets {
			if s != "" && strings.Contains(p, s) {
				t.Errorf("a secret (%d chars) appears in the %s", len(s), p[:strings.IndexByte(p, '\n')])
			}
		}
	}
}

func azureString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}
