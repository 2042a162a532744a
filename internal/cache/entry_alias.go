package cache

import (
	"net/http"

	"github.com/corralhq/corral/internal/cache/entry"
)

// Entry is one stored upstream answer; it lives in the leaf package
// internal/cache/entry so that the flight layer can use it without a store.
type Entry = entry.Entry

// KeepHeaders returns a copy of the headers of h worth replaying on a hit;
// see entry.KeepHeaders.
func KeepHeaders(h http.Header) http.Header { return entry.KeepHeaders(h) }
