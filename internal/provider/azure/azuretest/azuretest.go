// Package azuretest is a fake Azure OpenAI resource and a fake Microsoft
// Entra ID, both over TLS as the real ones are (azidentity and openai-go's
// azure option insist on https), for tests of Corral's Azure envelope.
//
// The resource serves both API styles as Azure does:
//
//   - v1: /openai/v1/<path> with no api-version (or "preview"/"latest");
//     the body's model names the deployment.
//   - classic: /openai/deployments/{deployment}/<path>?api-version=V for
//     the deployment-scoped endpoints (chat/completions, completions,
//     embeddings, audio/*, images/*) and /openai/<path>?api-version=V for
//     the rest; no api-version is Azure's 404 "Resource not found", an
//     unknown one its 400 "API version not supported".
//
// An unknown deployment is Azure's 404 DeploymentNotFound. Every call
// needs the resource's api-key or a bearer token the fake Entra ID issued
// and that has not expired (Azure's 401 bodies otherwise). Files, batches
// and stored responses are kept (objectstest's account) on both styles. Chat answers
// carry Azure's content-filter annotations; a prompt holding FilterMe is
// refused as Azure's content filter refuses, one holding ThrottleMe is
// Azure's 429 with its retry headers.
//
// The Entra ID fake serves what MSAL asks for with instance discovery
// off: the tenant's /v2.0/.well-known/openid-configuration and its token
// endpoint, the client_credentials grant with client_id and client_secret
// checked, issuing tokens of TokenLifetime that the resource accepts.
package azuretest

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/objects/objectstest"
)

// Options configure the fake. Zero values take the defaults in brackets.
type Options struct {
	// Deployments maps each deployment name to the model it serves,
	// answered as the response's model ["gpt-4o" → "gpt-4o-2024-08-06"].
	Deployments map[string]string
	// APIKey is the resource's key ["azure-key-0123456789abcdef"].
	APIKey string
	// TenantID, ClientID and ClientSecret are the one service principal
	// Entra ID knows.
	TenantID, ClientID, ClientSecret string
	// TokenLifetime is how long an issued token is valid, as its
	// expires_in says and as the resource enforces it [1h].
	TokenLifetime time.Duration
	// Now is the fake's clock for issuing and checking tokens [time.Now].
	Now func() time.Time
	// APIVersions are the classic API's supported versions
	// ["2024-10-21", "2024-06-01", "2025-04-01-preview"].
	APIVersions []string
}

// Call is one request the resource received.
type Call struct {
	// Path is the decoded path, EscapedPath as sent.
	Method, Path, EscapedPath, RawQuery string
	Header                              http.Header
	Body                                []byte
}

// Server is the fake resource and Entra ID.
type Server struct {
	API   *httptest.Server // the resource: https://127.0.0.1:port
	Entra *httptest.Server // the authority host
	o     Options
	files *objectstest.Server

	mu     sync.Mutex // protects calls, issued and tokens
	calls  []Call
	issued int
	tokens map[string]time.Time // issued token → its expiry
}

// New starts the fake; it is closed with the test.
func New(tb testing.TB, o Options) *Server {
	tb.Helper()
	if o.Deployments == nil {
		o.Deployments = map[string]string{"gpt-4o": "gpt-4o-2024-08-06"}
	}
	if o.APIKey == "" {
		o.APIKey = "azure-key-0123456789abcdef"
	}
	if o.TenantID == "" {
		o.TenantID = "72f988bf-86f1-41af-91ab-2d7cd011db47"
	}
	if o.ClientID == "" {
		o.ClientID = "00000000-1111-2222-3333-444444444444"
	}
	if o.ClientSecret == "" {
		o.ClientSecret = "entra-secret-fedcba9876543210"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TokenLifetime <= 0 {
		o.TokenLifetime = time.Hour
	}
	if len(o.APIVersions) == 0 {
		o.APIVersions = []string{"2024-10-21", "2024-06-01", "2025-04-01-preview"}
	}
	s := &Server{o: o, files: objectstest.New(), tokens: map[string]time.Time{}}
	s.API = httptest.NewTLSServer(http.HandlerFunc(s.serveAPI))
	s.Entra = httptest.NewTLSServer(http.HandlerFunc(s.serveEntra))
	tb.Cleanup(s.API.Close)
	tb.Cleanup(s.Entra.Close)
	return s
}

// V1URL is the v1 API's base URL.
func (s *Server) V1URL() string { return s.API.URL + "/openai/v1" }

// ClassicURL is the classic API's base URL (Corral's url with
// api_version set).
func (s *Server) ClassicURL() string { return s.API.URL + "/openai" }

// Endpoint is the resource's endpoint as openai-go's azure.WithEndpoint
// takes it.
func (s *Server) Endpoint() string { return s.API.URL + "/" }

// AuthorityHost is Entra ID's authority host (AZURE_AUTHORITY_HOST).
func (s *Server) AuthorityHost() string { return s.Entra.URL + "/" }

// Options are the fake's options with their defaults filled in.
func (s *Server) Options() Options { return s.o }

// Env is the environment azidentity's EnvironmentCredential reads for the
// fake's service principal.
func (s *Server) Env() []string {
	return []string{"AZURE_TENANT_ID=" + s.o.TenantID, "AZURE_CLIENT_ID=" + s.o.ClientID,
		"AZURE_CLIENT_SECRET=" + s.o.ClientSecret, "AZURE_AUTHORITY_HOST=" + s.AuthorityHost()}
}

// CertPEM is the certificate both servers present, PEM-encoded.
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.API.Certificate().Raw})
}

// WriteCert writes CertPEM to a file for SSL_CERT_FILE and returns its
// path.
func (s *Server) WriteCert(tb testing.TB) string {
	tb.Helper()
	p := filepath.Join(tb.TempDir(), "azure-fake.pem")
	if err := os.WriteFile(p, s.CertPEM(), 0o600); err != nil {
		tb.Fatal(err)
	}
	return p
}

// Transport is an http.Transport that trusts the fake's certificate.
func (s *Server) Transport() *http.Transport {
	pool := x509.NewCertPool()
	pool.AddCert(s.API.Certificate())
	return &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
}

// Calls returns every request the resource received, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// CallsTo returns the calls whose path is path.
func (s *Server) CallsTo(path string) []Call {
	var out []Call
	for _, c := range s.Calls() {
		if c.Path == path {
			out = append(out, c)
		}
	}
	return out
}

// TokensIssued is how many tokens Entra ID issued.
func (s *Server) TokensIssued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.issued
}

// Files is the kept account of files and batches.
func (s *Server) Files() *objectstest.Server { return s.files }

func (s *Server) record(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	s.mu.Lock()
	s.calls = append(s.calls, Call{Method: r.Method, Path: r.URL.Path, EscapedPath: r.URL.EscapedPath(), RawQuery: r.URL.RawQuery, Header: r.Header.Clone(), Body: b})
	s.mu.Unlock()
	return b
}

// serveAPI routes a call to the resource as Azure does: path and
// api-version first, then credentials, then the deployment.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request) {
	body := s.record(r)
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/openai/")
	if !ok {
		resourceNotFound(w)
		return
	}
	version := r.URL.Query().Get("api-version")
	var path, deployment string
	if p, ok := strings.CutPrefix(rest, "v1/"); ok {
		if version != "" && version != "preview" && version != "latest" {
			azureError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
			return
		}
		path = "/" + p
	} else {
		if version == "" {
			resourceNotFound(w)
			return
		}
		if !s.knownVersion(version) {
			azureError(w, http.StatusBadRequest, "BadRequest", "API version not supported")
			return
		}
		path = "/" + rest
		if d, ok := strings.CutPrefix(rest, "deployments/"); ok {
			name, p, found := strings.Cut(d, "/")
			dep, err := url.PathUnescape(name)
			if !found || err != nil || !deploymentScoped("/"+p) {
				resourceNotFound(w)
				return
			}
			deployment, path = dep, "/"+p
		} else if deploymentScoped(path) {
			resourceNotFound(w) // the classic API has these only under a deployment
			return
		}
	}
	if !s.authorized(w, r) {
		return
	}
	switch {
	case deploymentScoped(path):
		if deployment == "" {
			deployment = jsonModel(body) // v1: the model names the deployment
		}
		model, ok := s.o.Deployments[deployment]
		if !ok {
			deploymentNotFound(w)
			return
		}
		s.model(w, r, path, model, body)
	case path == "/responses" && r.Method == http.MethodPost && s.o.Deployments[jsonModel(body)] == "":
		deploymentNotFound(w) // the Responses API's model names the deployment on both styles
	case objectstest.Handles(path):
		r2 := r.Clone(r.Context())
		r2.URL.Path, r2.URL.RawPath = "/v1"+path, ""
		r2.Body = io.NopCloser(bytes.NewReader(body))
		s.files.ServeHTTP(w, r2)
	default:
		resourceNotFound(w)
	}
}

func (s *Server) knownVersion(v string) bool {
	for _, k := range s.o.APIVersions {
		if k == v {
			return true
		}
	}
	return false
}

// deploymentScoped reports whether path is one the classic API serves
// under /deployments/{id}.
func deploymentScoped(path string) bool {
	switch path {
	case "/chat/completions", "/completions", "/embeddings", "/audio/speech", "/audio/transcriptions",
		"/audio/translations", "/images/generations", "/images/edits":
		return true
	}
	return false
}
