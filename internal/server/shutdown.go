package server

import (
	"context"
	"io"
	"net/http"

	"github.com/corralhq/corral/internal/coalesce"
)

// Stop ends what a shutdown's grace period left open: every stream being
// relayed (a flight's, on this instance or mirrored from another; a
// bypass; a replay) ends with its API's error event, every flight ends
// (its upstream call cancelled, its lock released, the live stream it
// publishes ended and deleted), and non-streamed answers still waiting get
// a 503 gateway_shutting_down. Handlers return at once, so the HTTP
// server's connections go idle and the process can exit within
// CORRAL_SHUTDOWN_TIMEOUT instead of cutting streams without a word.
func (s *Server) Stop() {
	s.stopNow()
	s.flights.Stop()
}

// stopping reports that Stop was called.
func (s *Server) stopping() bool { return s.stopped.Err() != nil }

// closeOnStop closes body when Stop is called, so a relay blocked reading
// an upstream stream returns; the returned func stops watching.
func (s *Server) closeOnStop(body io.Closer) (unwatch func() bool) {
	return context.AfterFunc(s.stopped, func() { _ = body.Close() })
}

// replayStopped ends a replay cut by Stop with the format's error event,
// numbered next (after the events replayed).
func (s *Server) replayStopped(w http.ResponseWriter, c *call, next int64) {
	writeErrorEvent(w, c.format, statusError(coalesce.ErrShutdown), next)
	_ = http.NewResponseController(w).Flush()
}
