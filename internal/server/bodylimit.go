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
// With a Content-Length (the common case) it allocates exactly that much.
func readBody(r *http.Request) ([]byte, *apiError) {
	if n := r.ContentLength; n >= 0 && n <= 64<<20 {
		body := make([]byte, n)
		_, err := io.ReadFull(r.Body, body)
		if err == nil {
			return body, nil
		}
		return nil, bodyError(r, err)
	}
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(r.Body); err != nil {
		return nil, bodyError(r, err)
	}
	return buf.Bytes(), nil
}

// bodyError maps a body read failure to what the client is told.
func bodyError(r *http.Request, err error) *apiError {
	{
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return errTooLarge
		}
		if errors.Is(err, io.ErrUnexpectedEOF) || r.Context().Err() != nil {
			return errClientClosed
		}
		return errInvalidRequest("Could not read the request body.", "")
	}
}
