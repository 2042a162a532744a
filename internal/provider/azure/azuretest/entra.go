package azuretest

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"time"
)

// serveEntra is Entra ID's authority host for the one tenant: its OpenID
// configuration and its token endpoint's client_credentials grant.
func (s *Server) serveEntra(w http.ResponseWriter, r *http.Request) {
	tenant, rest, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if tenant != s.o.TenantID {
		entraError(w, http.StatusBadRequest, "invalid_tenant", 90002, "AADSTS90002: Tenant '"+tenant+"' not found.")
		return
	}
	base := s.Entra.URL + "/" + tenant
	switch {
	case rest == "v2.0/.well-known/openid-configuration" && r.Method == http.MethodGet:
		writeJSON(w, map[string]any{
			"issuer":                                base + "/v2.0",
			"authorization_endpoint":                base + "/oauth2/v2.0/authorize",
			"token_endpoint":                        base + "/oauth2/v2.0/token",
			"jwks_uri":                              s.Entra.URL + "/" + tenant + "/discovery/v2.0/keys",
			"response_types_supported":              []string{"code", "id_token", "code id_token", "id_token token"},
			"token_endpoint_auth_methods_supported": []string{"client_secret_post", "private_key_jwt", "client_secret_basic"},
			"tenant_region_scope":                   "NA",
		})
	case rest == "oauth2/v2.0/token" && r.Method == http.MethodPost:
		s.token(w, r)
	default:
		http.NotFound(w, r)
	}
}

// token runs the client_credentials grant: the client's id and secret
// must be the service principal's and the scope a .default one.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		entraError(w, http.StatusBadRequest, "invalid_request", 900144, "AADSTS900144: The request body must contain the following parameter: 'grant_type'.")
		return
	}
	f := r.PostForm
	switch {
	case f.Get("grant_type") != "client_credentials":
		entraError(w, http.StatusBadRequest, "unsupported_grant_type", 70003, "AADSTS70003: The app requested an unsupported grant type.")
		return
	case f.Get("client_id") != s.o.ClientID:
		entraError(w, http.StatusBadRequest, "unauthorized_client", 700016, "AADSTS700016: Application with identifier '"+f.Get("client_id")+"' was not found in the directory.")
		return
	case f.Get("client_secret") != s.o.ClientSecret:
		entraError(w, http.StatusUnauthorized, "invalid_client", 7000215, "AADSTS7000215: Invalid client secret provided. Ensure the secret being sent in the request is the client secret value, not the client secret ID.")
		return
	case !defaultScope(f.Get("scope")):
		entraError(w, http.StatusBadRequest, "invalid_scope", 1002012, "AADSTS1002012: The provided value for scope is not valid. Client credential flows must have a scope value with /.default suffixed to the resource identifier.")
		return
	}
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	tok := "entra-token-" + hex.EncodeToString(b)
	s.mu.Lock()
	s.tokens[tok] = s.o.Now().Add(s.o.TokenLifetime)
	s.issued++
	s.mu.Unlock()
	secs := int(s.o.TokenLifetime / time.Second)
	writeJSON(w, map[string]any{"token_type": "Bearer", "expires_in": secs, "ext_expires_in": secs, "access_token": tok})
}

// IssuedTokens are the tokens Entra ID issued (for tests that prove none
// leaks).
func (s *Server) IssuedTokens() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.tokens))
	for t := range s.tokens {
		out = append(out, t)
	}
	return out
}

func entraError(w http.ResponseWriter, status int, code string, n int, desc string) {
	b, _ := json.Marshal(map[string]any{"error": code, "error_description": desc, "error_codes": []int{n},
		"timestamp": time.Now().UTC().Format("2006-01-02 15:04:05Z"), "trace_id": "00000000-0000-0000-0000-000000000000",
		"correlation_id": "00000000-0000-0000-0000-000000000000"})
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// defaultScope reports whether scope (space-separated; MSAL adds openid,
// profile and offline_access) asks for a resource's .default scope.
func defaultScope(scope string) bool {
	for _, sc := range strings.Fields(scope) {
		if strings.HasSuffix(sc, "/.default") {
			return true
		}
	}
	return false
}
