// Package vertextest is a fake Google Vertex AI for tests: Claude's
// rawPredict, streamRawPredict and count-tokens:rawPredict, the
// OpenAI-compatible endpoint (endpoints/openapi/chat/completions), and
// Google's OAuth2 token endpoint for a service account, over real HTTP.
//
// It checks what Google checks. The token endpoint runs the JWT-bearer
// grant (RFC 7523) as oauth2.googleapis.com does: the assertion's RS256
// signature against the service account's public key, its iss, aud (the
// token_uri), scope, iat and exp; it issues opaque access tokens that
// live Options.TokenLifetime. The API endpoints refuse a missing, unknown
// or expired token with Google's 401 body. Claude's endpoints want the
// body anthropic-sdk-go's vertex package sends (anthropic_version in the
// body, no model, stream matching the method) and answer as Vertex does
// (SSE padded as Vertex pads it, text/event-stream; charset=utf-8).
//
// CredentialsFile is a service-account JSON (a fresh RSA key) whose
// token_uri points at the fake: set GOOGLE_APPLICATION_CREDENTIALS to it.
package vertextest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	// Project and Region are what the fake serves ["test-project",
	// "us-east5"]; a call for another project is refused (403).
	Project, Region string
	// TokenLifetime is how long an access token is good for [1h, as
	// Google's]. expires_in is whole seconds, so keep it ≥ 1s.
	TokenLifetime time.Duration
	// Before, when set, is called for each authorized API call before it is
	// answered (a test holds calls there, or counts arrivals).
	Before func(Request)
	// Reply, when set, answers an authorized API call in the fake's place
	// when it returns non-nil (an injected error, say).
	Reply func(Request) *Reply
}

// Reply is an answer Options.Reply gives.
type Reply struct {
	Status int
	Header http.Header
	Body   string
}

// Request is one API call the fake received.
type Request struct {
	Method string
	// Path is the escaped path as sent (RequestURI without the query).
	Path   string
	Query  string
	Header http.Header
	Body   []byte
	// Status is what the fake answered.
	Status int
}

// Server is a running fake.
type Server struct {
	// URL is the fake's base URL: the upstream's url, or the SDK's base URL.
	URL string
	// CredentialsFile is the service account's JSON key file.
	CredentialsFile string
	// Email is the service account's client_email.
	Email string

	opts     Options
	srv      *httptest.Server
	key      *rsa.PrivateKey
	keyID    string
	tokenURI string

	mu         sync.Mutex    // guards everything below
	ahead      time.Duration // how far the fake's clock is ahead of time.Now (tests move it on)
	tokens     map[string]time.Time
	grants     int
	refused    int
	assertions []string
	requests   []Request
}

// New starts a fake for tb, closed when tb ends.
func New(tb testing.TB, opts Options) *Server {
	tb.Helper()
	if opts.Project == "" {
		opts.Project = "test-project"
	}
	if opts.Region == "" {
		opts.Region = "us-east5"
	}
	if opts.TokenLifetime <= 0 {
		opts.TokenLifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		tb.Fatal(err)
	}
	s := &Server{opts: opts, key: key, keyID: randomHex(20), tokens: map[string]time.Time{},
		Email: "corral-test@" + opts.Project + ".iam.gserviceaccount.com"}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /token", s.token)
	mux.HandleFunc("/v1/", s.api)
	s.srv = httptest.NewServer(mux)
	tb.Cleanup(s.srv.Close)
	s.URL, s.tokenURI = s.srv.URL, s.srv.URL+"/token"
	s.CredentialsFile = filepath.Join(tb.TempDir(), "service-account.json")
	if err := os.WriteFile(s.CredentialsFile, s.CredentialsJSON(key), 0o600); err != nil {
		tb.Fatal(err)
	}
	return s
}

// CredentialsJSON is a service-account key file for the fake's account
// holding key: the fake's own key makes the real file, another one a
// forged file whose assertions the fake refuses.
func (s *Server) CredentialsJSON(key *rsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(err) // an RSA key always marshals
	}
	b, _ := json.MarshalIndent(map[string]string{
		"type":                        "service_account",
		"project_id":                  s.opts.Project,
		"private_key_id":              s.keyID,
		"private_key":                 string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})),
		"client_email":                s.Email,
		"client_id":                   "100000000000000000001",
		"auth_uri":                    "https://accounts.google.com/o/oauth2/auth",
		"token_uri":                   s.tokenURI,
		"auth_provider_x509_cert_url": "https://www.googleapis.com/oauth2/v1/certs",
		"client_x509_cert_url":        "https://www.googleapis.com/robot/v1/metadata/x509/" + s.Email,
		"universe_domain":             "googleapis.com",
	}, "", "  ")
	return b
}

// PrivateKeyPEM is the service account's private key as the key file
// holds it (its base64 body, to look for in logs and stores).
func (s *Server) PrivateKeyPEM() string {
	der, _ := x509.MarshalPKCS8PrivateKey(s.key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
}

// Grants is how many access tokens the token endpoint issued.
func (s *Server) Grants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.grants
}

// RefusedGrants is how many token requests the token endpoint refused.
func (s *Server) RefusedGrants() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refused
}

// Tokens are the access tokens the fake issued.
func (s *Server) Tokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tokens))
	for t := range s.tokens {
		out = append(out, t)
	}
	return out
}

// Assertions are the JWT assertions the token endpoint was sent.
func (s *Server) Assertions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.assertions...)
}

// Requests are the API calls received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Calls is how many API calls were received (authorized or not).
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

func (s *Server) record(r Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, r)
}

// api authorizes and answers a call below /v1/.
func (s *Server) api(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body}
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() { req.Status = rec.status; s.record(req) }()
	if !s.authorized(r.Header.Get("Authorization")) {
		rec.Header().Set("WWW-Authenticate", `Bearer realm="https://accounts.google.com/", error="invalid_token"`)
		googleError(rec, http.StatusUnauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials. "+
			"Expected OAuth 2 access token, login cookie or other valid authentication credential. "+
			"See https://developers.google.com/identity/sign-in/web/devconsole-project.")
		return
	}
	if s.opts.Before != nil {
		s.opts.Before(req)
	}
	if s.opts.Reply != nil {
		if rp := s.opts.Reply(req); rp != nil {
			for k, vv := range rp.Header {
				rec.Header()[k] = vv
			}
			rec.WriteHeader(rp.Status)
			_, _ = io.WriteString(rec, rp.Body)
			return
		}
	}
	s.route(rec, r, req)
}

// now is the fake's clock.
func (s *Server) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Now().Add(s.ahead)
}

// authorized reports whether h is "Bearer <a live token the fake issued>".
func (s *Server) authorized(h string) bool {
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.tokens[tok]
	return ok && time.Now().Add(s.ahead).Before(exp)
}

// route sends an authorized call to its method: the path is
// /v1/projects/{project}/locations/{region}/<resource>.
func (s *Server) route(w http.ResponseWriter, r *http.Request, req Request) {
	seg := strings.Split(strings.TrimPrefix(req.Path, "/"), "/")
	if len(seg) < 6 || seg[0] != "v1" || seg[1] != "projects" || seg[3] != "locations" {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	if seg[2] != s.opts.Project || seg[4] != s.opts.Region {
		googleError(w, http.StatusForbidden, "PERMISSION_DENIED",
			"Permission 'aiplatform.endpoints.predict' denied on resource '//aiplatform.googleapis.com/projects/"+seg[2]+"/locations/"+seg[4]+"' (or it may not exist).")
		return
	}
	if r.Method != http.MethodPost {
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
		return
	}
	rest := strings.Join(seg[5:], "/")
	switch {
	case rest == "endpoints/openapi/chat/completions":
		s.chat(w, req)
	case strings.HasPrefix(rest, "publishers/anthropic/models/") && len(seg) == 9:
		model, method, ok := strings.Cut(seg[8], ":")
		if !ok {
			googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
			return
		}
		s.claude(w, req, model, method)
	default:
		googleError(w, http.StatusNotFound, "NOT_FOUND", "The requested URL was not found on this server.")
	}
}

// googleError writes Google's error body.
func googleError(w http.ResponseWriter, status int, name, msg string) {
	b, _ := json.MarshalIndent(map[string]any{"error": map[string]any{"code": status, "message": msg, "status": name}}, "", "  ")
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Flush() {
	if f, ok := r.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
