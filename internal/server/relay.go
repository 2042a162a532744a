package server

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"
	"time"

	"github.com/corralhq/corral/internal/upstream"
)

// copyBufs pools the buffers used to copy non-SSE bodies.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay writes an upstream response to the client: 401/403 become 502
// (the credential at fault is Corral's, never the client's), event streams
// are relayed event by event with a flush after each, anything else is
// copied as it arrives.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		recordFrom(r.Context()).err = "upstream answered " + resp.Status
		writeError(w, errUpstreamAuth)
		return
	}
	upstream.CopyResponseHeader(w.Header(), resp.Header)
	if isEventStream(resp.Header) && resp.StatusCode == http.StatusOK {
		s.relayEvents(w, r, resp.Body)
		return
	}
	w.WriteHeader(resp.StatusCode)
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	if _, err := io.CopyBuffer(w, onlyReader{resp.Body}, *bp); err != nil {
		recordFrom(r.Context()).err = err.Error()
		// Headers are out; cutting the connection is the only way to tell
		// the client the body is incomplete.
		if r.Context().Err() == nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// relayEvents relays SSE events as they arrive. A stream that breaks or
// ends without [DONE] gets an OpenAI error event before it is closed, so
// SDKs report an error rather than a silently short answer.
func (s *Server) relayEvents(w http.ResponseWriter, r *http.Request, body io.Reader) {
	s.metrics.Streams(1)
	defer s.metrics.Streams(-1)
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	rc := http.NewResponseController(w)
	w.WriteHeader(http.StatusOK)
	_ = rc.Flush()
	er := upstream.NewEventReader(body)
	done := false
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && done {
				return
			}
			if r.Context().Err() != nil {
				return // the client left; its context cancelled the call
			}
			cause := "upstream stream ended before [DONE]"
			if !errors.Is(err, io.EOF) {
				cause = err.Error()
			}
			recordFrom(r.Context()).err = cause
			_, _ = w.Write(upstream.ErrorEvent(streamFailure(err).body()))
			_ = rc.Flush()
			return
		}
		if upstream.IsDone(upstream.Data(ev)) {
			done = true
		}
		_ = rc.SetWriteDeadline(time.Now().Add(writeStall))
		if _, err := w.Write(ev); err != nil {
			return // client gone; returning cancels the upstream call
		}
		if err := rc.Flush(); err != nil {
			return
		}
	}
}

// streamFailure is the error event for a stream that broke mid-way.
func streamFailure(err error) *apiError {
	if upstream.KindOf(err) == upstream.Timeout {
		return errUpstreamTimeout
	}
	return &apiError{Status: http.StatusBadGateway, Type: typeServer, Code: "upstream_error",
		Message: "The upstream stream ended before it was complete."}
}

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// onlyReader hides WriteTo so CopyBuffer uses the pooled buffer.
type onlyReader struct{ io.Reader }
