package server

import (
	"log/slog"
	"net/http"
	"runtime/debug"
)

// recoverer turns a handler panic into a 500 OpenAI error and a log line
// with the stack, so one bad request never takes the process down.
// http.ErrAbortHandler is re-panicked: it is how a handler deliberately
// cuts a response.
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.ErrorContext(r.Context(), "panic serving request",
					slog.String("request_id", requestIDFrom(r.Context())),
					slog.Any("panic", v),
					slog.String("stack", string(debug.Stack())))
				if sw, ok := w.(*statusWriter); ok && sw.wrote {
					// Headers are out: the only honest signal left is a cut.
					panic(http.ErrAbortHandler)
				}
				writeError(w, errInternal)
			}()
			next.ServeHTTP(w, r)
		})
	}
}
