package server

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/corralhq/corral/internal/upstream"
)

// copyBufs pools the buffers used to copy non-SSE bodies.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay writes an upstream response to the client: 401/403 become 502
// (the credential at fault is Corral's, never the client's), event streams
// are relayed event by event with a flush after each, anything else is
// copied as it arrives.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	s.relayWith(w, r, resp, relayOptions{})
}

// relayOptions adjust a relay for the API behind it.
type relayOptions struct {
	// onEvent sees each relayed event's data (nil: none).
	onEvent func(data []byte)
	// endsAtEOF: the stream's end is the end of the body (the Responses
	// API sends no [DONE]), not a cut.
	endsAtEOF bool
}

func (s *Server) relayWith(w http.ResponseWriter, r *http.Request, resp *http.Response, o relayOptions) {
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		recordFrom(r.Context()).err = "upstream answered " + resp.Status
		writeError(w, errUpstreamAuth)
		return
	}
	upstream.CopyResponseHeader(w.Header(), resp.Header)
	if isEventStream(resp.Header) && resp.StatusCode == http.StatusOK {
		s.relayEvents(w, r, resp.Body, o)
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
func (s *Server) relayEvents(w http.ResponseWriter, r *http.Request, body io.Reader, o relayOptions) {
	ew := s.startEvents(w)
	defer ew.close()
	er := upstream.NewEventReader(body)
	done := false
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && (done || o.endsAtEOF) {
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
			ew.fail(err)
			return
		}
		data := upstream.Data(ev)
		if upstream.IsDone(data) {
			done = true
		} else if o.onEvent != nil {
			o.onEvent(data)
		}
		if !ew.send(nil, ev) {
			return // client gone; returning cancels the upstream call
		}
	}
}

// eventWriter writes an event stream to one client: headers that keep
// proxies from buffering and a flush after every batch. The write deadline
// that drops a client that stops reading (alone, instead of pinning its
// handler) is writeDeadline's, as for every answer.
type eventWriter struct {
	s  *Server
	w  http.ResponseWriter
	rc *http.ResponseController
}

// startEvents sends the stream's headers (already set ones kept) and
// counts it as open until close.
func (s *Server) startEvents(w http.ResponseWriter) *eventWriter {
	s.metrics.Streams(1)
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	ew := &eventWriter{s: s, w: w, rc: http.NewResponseController(w)}
	w.WriteHeader(http.StatusOK)
	_ = ew.rc.Flush()
	return ew
}

// send writes events, except those skip refuses (skip may be nil), and
// flushes; false means the client is gone.
func (ew *eventWriter) send(skip func([]byte) bool, events ...[]byte) bool {
	for _, ev := range events {
		if skip != nil && skip(ev) {
			continue
		}
		if _, err := ew.w.Write(ev); err != nil {
			return false
		}
	}
	return ew.rc.Flush() == nil
}

// fail ends the stream with an OpenAI error event for err.
func (ew *eventWriter) fail(err error) {
	_, _ = ew.w.Write(upstream.ErrorEvent(streamFailure(err).body()))
	_ = ew.rc.Flush()
}

func (ew *eventWriter) close() { ew.s.metrics.Streams(-1) }

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
