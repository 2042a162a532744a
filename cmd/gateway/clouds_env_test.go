package main

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/provider/bedrock/bedrocktest"
)

// The cloud credential chains read the process environment, so the tests
// that use them set it (and are not parallel).

// awsEnv points AWS's default chain at bedrocktest's static key (with
// session, "" for none) and at nothing else: no shared files or profile,
// no instance metadata, no region of the machine's.
func awsEnv(t *testing.T, session string) {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("AWS_ACCESS_KEY_ID", bedrocktest.DefaultAccessKeyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", bedrocktest.DefaultSecretAccessKey)
	t.Setenv("AWS_SESSION_TOKEN", session)
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", writeFile(t, filepath.Join(dir, "aws-config"), ""))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", writeFile(t, filepath.Join(dir, "aws-credentials"), ""))
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_REGION", "")
}

// googleEnv points Google's application default credentials at the key
// file creds and at nothing else of Google's: no gcloud configuration, no
// metadata server.
func googleEnv(t *testing.T, creds string) {
	t.Helper()
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", creds)
	for _, k := range []string{"GOOGLE_CLOUD_PROJECT", "GOOGLE_CLOUD_QUOTA_PROJECT", "GOOGLE_CLOUD_UNIVERSE_DOMAIN",
		"GOOGLE_API_USE_CLIENT_CERTIFICATE", "GOOGLE_API_USE_MTLS_ENDPOINT", "GOOGLE_EXTERNAL_ACCOUNT_ALLOW_EXECUTABLES"} {
		t.Setenv(k, "")
	}
	t.Setenv("CLOUDSDK_CONFIG", t.TempDir())
	t.Setenv("GCE_METADATA_HOST", "127.0.0.1:1") // never the real metadata server
}

// postAs sends the JSON body to path on base with the tenant key key and returns the status, the
// headers and the body.
func postAs(t *testing.T, base, path, key, body string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}
