package main

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/corralhq/corral/internal/provider/vertex/vertextest"
)

// TestVertexCredentialsLater: a gateway whose Google credentials are not
// there yet starts, warns naming the cloud, answers 502 without calling
// Vertex, and serves once the key file appears.
func TestVertexCredentialsLater(t *testing.T) {
	fake := vertextest.New(t, vertextest.Options{})
	later := filepath.Join(t.TempDir(), "later.json")
	logs := newLineWriter()
	c := &vertexCluster{logs: logs}
	wireVertex(t, c, fake, later, 1, logs)
	logs.waitFor(t, regexp.MustCompile(`"msg":"cloud credentials not available yet; those upstreams fail over until they are","cloud":"google"`))
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	_, err := vertexClaude(c.bases[0]).Messages.New(ctx, vertexClaudeParams("too early"))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadGateway || fake.Calls() != 0 {
		t.Fatalf("no credentials: %v after %d Vertex calls; want Anthropic's 502 and none", err, fake.Calls())
	}
	key, _ := os.ReadFile(fake.CredentialsFile)
	if err := os.WriteFile(later, key, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := vertexClaude(c.bases[0]).Messages.New(ctx, vertexClaudeParams("in time")); err != nil || fake.Calls() != 1 {
		t.Fatalf("credentials in place: %v after %d Vertex calls", err, fake.Calls())
	}
	c.assertNoSecrets(t, aerr.Error())
}

// TestVertexErrorsThroughCorral: Google's quota error reaches
// anthropic-sdk-go as Anthropic's 429 with Retry-After; Vertex refusing
// Corral's token is the client's 502, not a 401 it would blame its own key
// for.
func TestVertexErrorsThroughCorral(t *testing.T) {
	replies := map[string]*vertextest.Reply{
		"quota": {Status: 429, Header: http.Header{"Retry-After": {"9"}, "Content-Type": {"application/json; charset=UTF-8"}},
			Body: `{"error":{"code":429,"message":"Quota exceeded for aiplatform.googleapis.com/online_prediction_requests_per_base_model.","status":"RESOURCE_EXHAUSTED"}}`},
		"refused": {Status: 403, Header: http.Header{"Content-Type": {"application/json; charset=UTF-8"}},
			Body: `{"error":{"code":403,"message":"Permission 'aiplatform.endpoints.predict' denied.","status":"PERMISSION_DENIED"}}`},
	}
	c := startVertexCluster(t, vertextest.Options{Reply: func(r vertextest.Request) *vertextest.Reply {
		return replies[regexp.MustCompile(`Vertex test: (\w+)`).FindStringSubmatch(string(r.Body))[1]]
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := vertexClaude(c.bases[0]).Messages.New(ctx, vertexClaudeParams("Vertex test: quota"))
	var aerr *anthropic.Error
	// The server words an upstream's 429 itself (its failure classes);
	// the status, the type and Retry-After are Vertex's.
	if !errors.As(err, &aerr) || aerr.StatusCode != 429 || aerr.Response.Header.Get("Retry-After") != "9" ||
		!strings.HasPrefix(aerr.RawJSON(), `{"type":"error","error":{"type":"rate_limit_error",`) {
		t.Errorf("quota: %v (Retry-After %q)", err, aerr.Response.Header.Get("Retry-After"))
	}
	seen := []string{err.Error()}
	_, err = vertexClaude(c.bases[1]).Messages.New(ctx, vertexClaudeParams("Vertex test: refused"))
	if !errors.As(err, &aerr) || aerr.StatusCode != http.StatusBadGateway {
		t.Errorf("Vertex refusing Corral's credentials: %v; want 502", err)
	}
	c.assertNoSecrets(t, append(seen, err.Error())...)
}
