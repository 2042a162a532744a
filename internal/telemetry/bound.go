package telemetry

import (
	"net/http"
	"unicode/utf8"
)

// MaxValueLen is the longest text Corral puts in a span name or attribute
// from what a client sent (a path, a model name). A client controls those
// strings up to the header or body limit (1 MiB, 8 MiB), and one span
// that large fails its whole export batch at the collector (OTLP/gRPC
// refuses messages over 4 MiB by default), losing every other tenant's
// spans with it; a trace backend also indexes names, so they stay short.
const MaxValueLen = 256

// Bound is s cut to at most MaxValueLen bytes, on a rune boundary.
func Bound(s string) string {
	if len(s) <= MaxValueLen {
		return s
	}
	n := MaxValueLen
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// OtherMethod is what a request method HTTP does not define is named in
// spans, as the HTTP semantic conventions ask: net/http accepts any token
// as a method, so a name or attribute made of it would be the client's
// to choose, in length and in number.
const OtherMethod = "_OTHER"

// Method is m when HTTP defines it, else OtherMethod.
func Method(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodConnect, http.MethodOptions, http.MethodTrace:
		return m
	}
	return OtherMethod
}
