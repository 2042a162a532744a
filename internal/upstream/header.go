package upstream

import (
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// hopByHop are the connection-level headers of RFC 9110 §7.6.1 that a
// proxy must not forward in either direction.
var hopByHop = []string{
	"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
	"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade",
}

// requestDeny are client headers that never go upstream: the client's own
// credentials in every style a tenant may send them (Corral sends its own), Corral's request controls, and
// headers the transport sets itself. OpenAI-Organization and
// OpenAI-Project belong to the client's account, not to Corral's key. The
// method-override headers would make an upstream (or a framework in front
// of it) run another method than the one Corral checked: a POST /files
// that lists every tenant's files as a GET.
var requestDeny = map[string]bool{
	"Authorization":       true,
	"Api-Key":             true,
	"X-Api-Key":           true,
	"Cookie":              true,
	"Host":                true,
	"Content-Length":      true,
	"Accept-Encoding":     true,
	"Cache-Control":       true,
	"Openai-Organization": true,
	"Openai-Project":      true,
	// Method overrides, as frameworks read them.
	"X-Http-Method-Override": true,
	"X-Http-Method":          true,
	"X-Method-Override":      true,
}

// forwardHeader copies the client's headers that are safe to send upstream.
// A tracestate goes only when it is valid W3C Trace Context, as its parsed
// form; baggage only when baggage is set (Options.ForwardBaggage).
func forwardHeader(dst, src http.Header, baggage bool) {
	for k, vv := range src {
		if requestDeny[k] || isHopByHop(src, k) || strings.HasPrefix(k, "X-Corral-") {
			continue
		}
		switch k {
		case "Tracestate":
			if v, ok := validTraceState(vv); ok {
				dst[k] = []string{v}
			}
			continue
		case "Baggage":
			if !baggage {
				continue
			}
		}
		dst[k] = vv
	}
}

// validTraceState is the client's tracestate (its header lines are one
// list, RFC 9110 §5.3) when it follows the W3C rules: at most 32
// list-members key=value, keys and values of the allowed characters, no
// key twice. Anything else is forwarded to nobody: an upstream's tracer
// may reject the whole trace over it, and it is a free-form channel from a
// client to a shared upstream.
func validTraceState(vv []string) (string, bool) {
	ts, err := trace.ParseTraceState(strings.Join(vv, ","))
	if err != nil || ts.Len() == 0 {
		return "", false
	}
	return ts.String(), true
}

// responseDeny are upstream response headers a client never sees: framing
// Corral recomputes, cookies, the upstream's own request id (Corral's
// X-Request-Id is the one clients correlate with), and what describes the
// upstream's account or servers rather than the answer.
var responseDeny = map[string]bool{
	"Content-Length":            true,
	"Set-Cookie":                true,
	"X-Request-Id":              true,
	"Request-Id":                true, // Anthropic's own request id
	"Openai-Organization":       true,
	"Openai-Project":            true,
	"Anthropic-Organization-Id": true, // names Corral's Anthropic account
	"Server":                    true,
	"Alt-Svc":                   true,
}

// CopyResponseHeader copies the upstream response headers a client should
// see. Hop-by-hop headers, the length (Corral may re-frame the body),
// cookies, and the upstream's own rate-limit and organization headers
// (they describe Corral's account, not the tenant's) are dropped.
func CopyResponseHeader(dst, src http.Header) {
	for k, vv := range src {
		if isHopByHop(src, k) || responseDeny[k] || strings.HasPrefix(k, "X-Ratelimit-") || strings.HasPrefix(k, "Anthropic-Ratelimit-") {
			continue
		}
		dst[k] = vv
	}
}

func isHopByHop(h http.Header, k string) bool {
	for _, hh := range hopByHop {
		if k == hh {
			return true
		}
	}
	// Headers named in Connection are hop-by-hop too.
	for _, v := range h["Connection"] {
		for f := range strings.SplitSeq(v, ",") {
			if http.CanonicalHeaderKey(strings.TrimSpace(f)) == k {
				return true
			}
		}
	}
	return false
}
