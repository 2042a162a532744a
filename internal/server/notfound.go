package server

import (
	"net/http"
	"strings"
)

// A client whose base URL lacks /v1 (the Vercel AI SDK's Anthropic
// provider pointed at http://host, an OpenAI SDK at http://host) asks for
// /messages or /chat/completions. Corral answers every path it does not
// serve with a 404 in the shape of the API the request names, saying which
// /v1 path was meant when there is an obvious one and what the base URL
// should be, so the mistake is visible in the client's own error.

// handleUnknownPath answers a path no route serves.
func handleUnknownPath(w http.ResponseWriter, r *http.Request) {
	nameAPI(w, r)
	writeError(w, errUnknownPath(r))
}

// handleMethodNotAllowed answers a method a route outside /v1 does not
// take, in the shape of the API the request names.
func handleMethodNotAllowed(w http.ResponseWriter, r *http.Request) {
	nameAPI(w, r)
	writeError(w, errMethodNotAllowed)
}

// nameAPI makes Corral's own answer to r take Anthropic's shape when r
// names Anthropic's API outside /v1 (where apiOfRequest does not look):
// it carries anthropic-version, or its key as x-api-key, as Anthropic's
// SDKs and agents send them and OpenAI's never do.
func nameAPI(w http.ResponseWriter, r *http.Request) {
	if header(r.Header, "Anthropic-Version") == "" && header(r.Header, "X-Api-Key") == "" {
		return
	}
	if sw := statusWriterOf(w); sw != nil {
		sw.anthropic = true
	}
}

// v1Segments are the first path segments below /v1 of the APIs a client
// asks for: a path outside /v1 that starts with one meant /v1 + path.
var v1Segments = []string{
	"chat", "completions", "embeddings", "responses", "messages", "models", "files",
	"batches", "moderations", "images", "audio", "uploads", "vector_stores", "conversations",
}

// maxShownPath is the longest path a 404 repeats to its client.
const maxShownPath = 100

// errUnknownPath is the 404 for r's path, which no route serves.
func errUnknownPath(r *http.Request) *apiError {
	p := r.URL.Path
	set := "the base URL to " + baseURL(r)
	if !showable(p, maxShownPath, "-._~/:@+") {
		return clientError(http.StatusNotFound, "not_found",
			"This is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: set "+set+".")
	}
	seg, _, _ := strings.Cut(strings.TrimPrefix(p, "/"), "/")
	for _, s := range v1Segments {
		if seg == s {
			return clientError(http.StatusNotFound, "not_found",
				p+" is not a Corral path; did you mean /v1"+p+"? Set "+set+".")
		}
	}
	return clientError(http.StatusNotFound, "not_found",
		p+" is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: set "+set+".")
}

// baseURL is the base URL a client of this gateway sets, as far as r
// shows it: its scheme and Host, when the Host is a plain host[:port].
func baseURL(r *http.Request) string {
	if !showable(r.Host, 255, "-.:[]") || r.Host == "" {
		return "this gateway's address followed by /v1"
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + "/v1"
}

// showable reports whether s, client input, can be repeated in an answer
// as it is: at most max bytes of ASCII letters, digits and the bytes of
// extra (no control, bidi or other characters that could make a message
// read as something it is not).
func showable(s string, max int, extra string) bool {
	if len(s) > max {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte(extra, c) >= 0:
		default:
			return false
		}
	}
	return true
}
