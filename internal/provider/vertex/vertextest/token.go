package vertextest

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"
)

// jwtBearer is the grant type of RFC 7523, the one a service account's
// assertion is exchanged with.
const jwtBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

// cloudPlatform is the scope Vertex AI's calls need.
const cloudPlatform = "https://www.googleapis.com/auth/cloud-platform"

// maxAssertionLife is Google's bound on exp - iat: an assertion is a
// short-lived token (60 minutes).
const maxAssertionLife = time.Hour

// skew is how far in the future an assertion's iat may be.
const skew = 5 * time.Minute

// token is the token endpoint: it verifies the JWT-bearer grant's
// assertion and issues an opaque access token.
func (s *Server) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		s.refuse(w, "invalid_request", "Invalid request body.")
		return
	}
	if gt := r.PostForm.Get("grant_type"); gt != jwtBearer {
		s.refuse(w, "unsupported_grant_type", "Invalid grant_type: "+gt)
		return
	}
	assertion := r.PostForm.Get("assertion")
	s.mu.Lock()
	s.assertions = append(s.assertions, assertion)
	s.mu.Unlock()
	if code, why := s.verify(assertion, s.now()); code != "" {
		s.refuse(w, code, why)
		return
	}
	tok := "ya29.c." + randomHex(48)
	s.mu.Lock()
	s.tokens[tok] = time.Now().Add(s.ahead + s.opts.TokenLifetime)
	s.grants++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache, no-store, max-age=0, must-revalidate")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"access_token": tok,
		"expires_in":   int(s.opts.TokenLifetime / time.Second),
		"token_type":   "Bearer",
	})
}

// verify checks a service account's assertion as Google does; it returns
// the OAuth2 error code and description of what is wrong, or "".
func (s *Server) verify(assertion string, now time.Time) (code, why string) {
	const badSig = "Invalid JWT Signature."
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return "invalid_grant", "Invalid JWT: the assertion is not a signed JWT."
	}
	var head struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}
	if !decodePart(parts[0], &head) || head.Alg != "RS256" {
		return "invalid_grant", "Invalid JWT: the header must name alg RS256."
	}
	if head.Kid != "" && head.Kid != s.keyID {
		return "invalid_grant", badSig
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return "invalid_grant", badSig
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(&s.key.PublicKey, crypto.SHA256, sum[:], sig) != nil {
		return "invalid_grant", badSig
	}
	var claims struct {
		Iss   string `json:"iss"`
		Aud   string `json:"aud"`
		Scope string `json:"scope"`
		Iat   int64  `json:"iat"`
		Exp   int64  `json:"exp"`
	}
	if !decodePart(parts[1], &claims) {
		return "invalid_grant", "Invalid JWT: the claim set is not JSON."
	}
	iat, exp := time.Unix(claims.Iat, 0), time.Unix(claims.Exp, 0)
	switch {
	case claims.Iss != s.Email:
		return "invalid_grant", "Invalid JWT: the issuer is not the service account."
	case claims.Aud != s.tokenURI:
		return "invalid_grant", "Invalid JWT: the audience is not the token URI."
	case claims.Iat == 0 || claims.Exp == 0 || !exp.After(iat) || exp.Sub(iat) > maxAssertionLife ||
		iat.After(now.Add(skew)) || !exp.After(now):
		return "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
	case !slices.Contains(strings.Fields(claims.Scope), cloudPlatform):
		return "invalid_scope", "Invalid OAuth scope or ID token audience provided."
	}
	return "", ""
}

// decodePart decodes one base64url part of a JWT into v.
func decodePart(part string, v any) bool {
	b, err := base64.RawURLEncoding.DecodeString(part)
	return err == nil && json.Unmarshal(b, v) == nil
}

// refuse answers a token request with Google's OAuth2 error.
func (s *Server) refuse(w http.ResponseWriter, code, why string) {
	s.mu.Lock()
	s.refused++
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(http.StatusBadRequest)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": why})
}
