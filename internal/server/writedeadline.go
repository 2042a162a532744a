package server

import (
	"net/http"
	"time"
)

// stallChunk is the most one deadline covers: a large answer is written in
// pieces, each with a fresh deadline, so a client that reads slowly but
// steadily is never cut, only one that stops. A client must take 64 KiB per
// stall: 2 KiB/s with the default 30 s.
const stallChunk = 64 << 10

// writeDeadline gives every write of every response a deadline of stall
// from its start: JSON answers, relayed bodies, replayed and live streams,
// errors. A client that stops reading is dropped after stall and its
// handler returns, instead of pinning the answer's memory and a goroutine
// for as long as the client keeps the connection (issue 13, fault 5: 50
// such clients on a 4 MB answer held 300 MB). The server has no
// WriteTimeout because streams run for minutes; this bounds a stall, not a
// response.
//
// A deadline set for one response outlives it on a keep-alive connection,
// so each request starts by clearing the one its predecessor left.
func writeDeadline(stall time.Duration) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			sw := &stallWriter{ResponseWriter: w, dl: findDeadliner(w), stall: stall}
			sw.setDeadline(time.Time{})
			next.ServeHTTP(sw, r)
		})
	}
}

// stallWriter sets the write deadline before each write and flush.
type stallWriter struct {
	http.ResponseWriter
	dl    deadliner                // the connection's, found once; nil for a recorder
	rc    *http.ResponseController // for flushes, made on the first
	stall time.Duration
}

// deadliner is what net/http's own ResponseWriter implements and
// http.ResponseController calls.
type deadliner interface{ SetWriteDeadline(time.Time) error }

// findDeadliner walks w's Unwrap chain as http.ResponseController does,
// once per request rather than on every write.
func findDeadliner(w http.ResponseWriter) deadliner {
	for {
		if d, ok := w.(deadliner); ok {
			return d
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return nil // unsupported (a recorder) is fine
		}
		w = u.Unwrap()
	}
}

func (w *stallWriter) setDeadline(t time.Time) {
	if w.dl != nil {
		_ = w.dl.SetWriteDeadline(t)
	}
}

func (w *stallWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), stallChunk)
		w.setDeadline(time.Now().Add(w.stall))
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		if err != nil {
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

// FlushError is what http.ResponseController.Flush calls. net/http's own
// writer is flushed directly, one ResponseController frame fewer on a
// stream handler's stack (see handleModelCall).
func (w *stallWriter) FlushError() error {
	w.setDeadline(time.Now().Add(w.stall))
	if f, ok := w.ResponseWriter.(interface{ FlushError() error }); ok {
		return f.FlushError()
	}
	if w.rc == nil {
		w.rc = http.NewResponseController(w.ResponseWriter)
	}
	return w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the connection's deadlines.
func (w *stallWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
