package server

import "net/http"

// header is h.Get(key) for a key already in canonical form (the constants
// of the hit path): http.Header.Get canonicalises its key on every call,
// about 400 instructions, and a hit made a dozen such calls. Header maps
// of requests net/http parsed hold canonical keys only.
func header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
