// Package redact hides what a URL can carry that must not reach a log line,
// an error or a span: the userinfo (user:password@) and the query, where
// some providers and collectors take a key or a token. Corral logs the
// URLs an operator configured (upstreams, the OTLP endpoint) and the errors
// of calls to them; each goes through URL first.
package redact

import "net/url"

// URL returns raw with its userinfo replaced by "redacted" and its whole
// query by "redacted", so "https://u:p@host/v1?key=k" reads
// "https://redacted@host/v1?redacted". A URL that does not parse is not
// quoted at all: its text could be anything.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	if u.User != nil {
		u.User = url.User("redacted")
	}
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.String()
}
