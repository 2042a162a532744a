package bedrocktest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// This file checks a request's Signature Version 4 as AWS's services do,
// written from AWS's description of the algorithm ("Create a signed AWS
// API request", IAM user guide), not from the SDK's signer: the fake must
// be able to tell a wrong signature from a right one on its own. The
// canonical URI is the path as it came on the wire, URI-encoded once more
// (every service but S3 takes the path encoded twice).

// authError is a refusal as Bedrock's front end words it: the exception
// name (x-amzn-ErrorType) and message, always 403.
type authError struct{ name, message string }

func (e *authError) Error() string { return e.name + ": " + e.message }

// maxSkew is how far a request's X-Amz-Date may be from the server's
// clock, as AWS allows.
const maxSkew = 5 * time.Minute

// verifySigV4 checks r's SigV4 Authorization for the fake's key, region
// and service "bedrock" over body; nil means it is right.
func (s *Server) verifySigV4(r *http.Request, body []byte) *authError {
	auth := r.Header.Get("Authorization")
	rest, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return &authError{"IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders' with AWS4-HMAC-SHA256."}
	}
	fields := map[string]string{}
	for f := range strings.SplitSeq(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(f), "=")
		fields[k] = v
	}
	cred, signed, sig := fields["Credential"], fields["SignedHeaders"], fields["Signature"]
	if cred == "" || signed == "" || sig == "" {
		return &authError{"IncompleteSignatureException", "Authorization header requires 'Credential', 'Signature' and 'SignedHeaders'."}
	}
	parts := strings.Split(cred, "/")
	if len(parts) != 5 || parts[4] != "aws4_request" {
		return &authError{"IncompleteSignatureException", "Credential should be scoped to a valid region."}
	}
	keyID, day, region, svc := parts[0], parts[1], parts[2], parts[3]
	if keyID != s.o.AccessKeyID {
		return &authError{"UnrecognizedClientException", "The security token included in the request is invalid."}
	}
	if region != s.o.Region || svc != "bedrock" {
		return &authError{"InvalidSignatureException", fmt.Sprintf("Credential should be scoped to a valid region and service 'bedrock', not '%s' '%s'.", region, svc)}
	}
	amzDate := r.Header.Get("X-Amz-Date")
	at, err := time.Parse("20060102T150405Z", amzDate)
	if err != nil || !strings.HasPrefix(amzDate, day) {
		return &authError{"IncompleteSignatureException", "X-Amz-Date must be the signing date in ISO 8601 basic format."}
	}
	if d := s.now().Sub(at); d > maxSkew || d < -maxSkew {
		return &authError{"InvalidSignatureException", "Signature expired: " + amzDate + " is now earlier or later than the server's time by more than 5 minutes."}
	}
	names := strings.Split(signed, ";")
	if !sort.StringsAreSorted(names) || !contains(names, "host") || !contains(names, "x-amz-date") {
		return &authError{"InvalidSignatureException", "SignedHeaders must be sorted and include host and x-amz-date."}
	}
	if s.o.SessionToken != "" {
		if r.Header.Get("X-Amz-Security-Token") != s.o.SessionToken {
			return &authError{"UnrecognizedClientException", "The security token included in the request is invalid."}
		}
		if !contains(names, "x-amz-security-token") {
			return &authError{"InvalidSignatureException", "The security token must be signed."}
		}
	}
	sum := sha256.Sum256(body)
	payloadHash := hex.EncodeToString(sum[:])
	if h := r.Header.Get("X-Amz-Content-Sha256"); h != "" && h != payloadHash {
		return &authError{"InvalidSignatureException", "The provided 'x-amz-content-sha256' header does not match what was computed."}
	}
	path, query, _ := strings.Cut(r.RequestURI, "?")
	canonical := strings.Join([]string{
		r.Method,
		uriEncode(path, false),
		canonicalQuery(query),
		canonicalHeaders(r, names),
		signed,
		payloadHash,
	}, "\n")
	crSum := sha256.Sum256([]byte(canonical))
	scope := day + "/" + region + "/" + svc + "/aws4_request"
	toSign := "AWS4-HMAC-SHA256\n" + amzDate + "\n" + scope + "\n" + hex.EncodeToString(crSum[:])
	key := hmacSHA256([]byte("AWS4"+s.o.SecretAccessKey), day)
	key = hmacSHA256(key, region)
	key = hmacSHA256(key, svc)
	key = hmacSHA256(key, "aws4_request")
	want := hex.EncodeToString(hmacSHA256(key, toSign))
	if !hmac.Equal([]byte(want), []byte(sig)) {
		return &authError{"InvalidSignatureException", "The request signature we calculated does not match the signature you provided. Check your AWS Secret Access Key and signing method. Consult the service documentation for details."}
	}
	return nil
}

// canonicalHeaders is each signed header's lower-case name, a colon and
// its values (trimmed, inner runs of spaces made one, several joined
// with commas), one a line, each line ending in a newline.
func canonicalHeaders(r *http.Request, names []string) string {
	var b strings.Builder
	for _, n := range names {
		var vv []string
		switch n {
		case "host":
			vv = []string{r.Host}
		case "content-length":
			vv = []string{strconv.FormatInt(r.ContentLength, 10)}
		default:
			vv = r.Header.Values(n)
		}
		for i, v := range vv {
			vv[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.Join(vv, ","))
		b.WriteByte('\n')
	}
	return b.String()
}

// canonicalQuery is the query's parameters, names and values URI-encoded,
// sorted by name then value, joined by '&'.
func canonicalQuery(raw string) string {
	if raw == "" {
		return ""
	}
	var pairs []string
	for p := range strings.SplitSeq(raw, "&") {
		k, v, _ := strings.Cut(p, "=")
		k, _ = url.QueryUnescape(k)
		v, _ = url.QueryUnescape(v)
		pairs = append(pairs, uriEncode(k, true)+"="+uriEncode(v, true))
	}
	sort.Strings(pairs)
	return strings.Join(pairs, "&")
}

// uriEncode is AWS's UriEncode: every byte but the unreserved characters
// (A-Z a-z 0-9 - . _ ~) as %XX in upper-case hex; '/' too when slash.
func uriEncode(s string, slash bool) string {
	const hexDigits = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_', c == '~':
			b.WriteByte(c)
		case c == '/' && !slash:
			b.WriteByte(c)
		default:
			b.WriteByte('%')
			b.WriteByte(hexDigits[c>>4])
			b.WriteByte(hexDigits[c&15])
		}
	}
	return b.String()
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
