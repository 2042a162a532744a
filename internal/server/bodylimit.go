package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
)

// bodyLimit refuses bodies over limit with 413: at once when
// Content-Length says so, otherwise when reading crosses the limit.
func bodyLimit(limit int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.ContentLength > limit {
				writeError(w, errTooLarge)
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// readBody reads the whole request body. A body over the limit is a 413.
func readBody(r *http.Request) ([]byte, *apiError) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	if _, err := buf.ReadFrom(r.Body); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, errTooLarge
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || r.Context().Err() != nil {
			return nil, errClientClosed
		}
		return nil, errInvalidRequest("Could not read the request body.", "")
	}
	return buf.Bytes(), nil
}
