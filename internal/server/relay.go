package server

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"sync"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// copyBufs pools the buffers used to copy non-SSE bodies.
var copyBufs = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// relay writes an upstream response to the client: 401/403 become 502
// (the credential at fault is Corral's, never the client's), event streams
// are relayed event by event with a flush after each, anything else is
// copied as it arrives; a body of unknown length is flushed after every
// read, as httputil.ReverseProxy does, so a slow or chunked body reaches
// the client as it comes.
func (s *Server) relay(w http.ResponseWriter, r *http.Request, resp *http.Response) {
	s.relayWith(w, r, resp, relayOptions{})
}

// relayOptions adjust a relay for the API behind it.
type relayOptions struct {
	// format is the API's wire format (default: errorFormat's).
	format wire.Format
	// onEvent sees each relayed event's data, the final event's excepted
	// (nil: none).
	onEvent func(data []byte)
	// usage, when set, reads the usage of a 200 answer as it is relayed
	// (the body, or the stream's events through an assembler) for endpoint
	// and hands it over once the answer is out, unknown when the answer
	// carried none or none Corral believes; it is not called for an answer
	// cut short, one that is not the API's answer, or one longer than
	// maxUsageBody.
	usage    func(wire.Usage)
	endpoint string
	// answered, when set, is called once the upstream's 200 answer starts
	// to be relayed: from then on the call has cost something (its usage,
	// else its estimate); a call that got no 200 answered no prompt.
	answered func()
	// skip, when set, refuses the events of a stream its client does not
	// receive (the usage chunk Corral asked for on its behalf); usage is
	// still read from them.
	skip func(ev []byte) bool
	// original is the client's own body when the one sent upstream was
	// prepared (wire.Format.Prepare): an upstream that refuses the
	// prepared body's stream_options is sent this one (caller.unspliced).
	original []byte
}

// maxUsageBody bounds the copy of a non-streamed answer kept to read its
// usage; a longer answer is charged its estimate.
const maxUsageBody = 8 << 20

// usageTee keeps the first maxUsageBody bytes written through it.
type usageTee struct {
	buf  []byte
	over bool
}

func (u *usageTee) Write(p []byte) (int, error) {
	if !u.over {
		if len(u.buf)+len(p) > maxUsageBody {
			u.over, u.buf = true, nil
		} else {
			u.buf = append(u.buf, p...)
		}
	}
	return len(p), nil
}

func (s *Server) relayWith(w http.ResponseWriter, r *http.Request, resp *http.Response, o relayOptions) {
	if o.format == nil {
		o.format = errorFormat
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		recordFrom(r.Context()).err = "upstream answered " + resp.Status
		writeError(w, errUpstreamAuth)
		return
	}
	if o.answered != nil && resp.StatusCode == http.StatusOK {
		o.answered()
	}
	upstream.CopyResponseHeader(w.Header(), resp.Header)
	if isEventStream(resp.Header) && resp.StatusCode == http.StatusOK {
		s.relayEvents(w, r, resp.Body, o)
		return
	}
	w.WriteHeader(resp.StatusCode)
	var dst io.Writer = w
	if resp.ContentLength < 0 {
		dst = flushWriter{w: w, rc: http.NewResponseController(w)}
	}
	var tee *usageTee
	if o.usage != nil && resp.StatusCode == http.StatusOK {
		tee = &usageTee{}
		dst = io.MultiWriter(dst, tee)
	}
	bp := copyBufs.Get().(*[]byte)
	defer copyBufs.Put(bp)
	_, err := io.CopyBuffer(dst, onlyReader{resp.Body}, *bp)
	if err == nil && tee != nil && !tee.over {
		if ok, u := wire.AnswerUsage(o.format, o.endpoint, tee.buf); ok {
			o.usage(u)
		}
	}
	if err != nil {
		recordFrom(r.Context()).err = err.Error()
		// Headers are out; cutting the connection is the only way to tell
		// the client the body is incomplete.
		if r.Context().Err() == nil {
			panic(http.ErrAbortHandler)
		}
	}
}

// flushWriter flushes after every write.
type flushWriter struct {
	w  io.Writer
	rc *http.ResponseController
}

func (fw flushWriter) Write(p []byte) (int, error) {
	n, err := fw.w.Write(p)
	if err == nil {
		_ = fw.rc.Flush() // a writer that cannot flush still gets the bytes
	}
	return n, err
}

// relayEvents relays SSE events as they arrive. A stream that breaks or
// ends without its final event gets the format's error event before it is
// closed, so SDKs report an error rather than a silently short answer.
func (s *Server) relayEvents(w http.ResponseWriter, r *http.Request, body io.ReadCloser, o relayOptions) {
	ew := s.startEvents(w, o.format)
	defer ew.close()
	defer s.closeOnStop(body)()
	st := s.startStream(r.Context())
	defer st.end()
	er := sse.NewEventReader(body)
	done := false
	var asm wire.Assembler
	if o.usage != nil {
		asm = o.format.NewAssembler(o.endpoint)
	}
	for {
		ev, err := er.Next()
		if err != nil {
			if errors.Is(err, io.EOF) && done {
				if asm != nil {
					// A stream that ended whole but cannot be assembled
					// (its usage event unreadable) has unknown usage.
					_, u, err := asm.Finish()
					if err != nil {
						u = wire.Usage{}
					}
					o.usage(u)
				}
				return
			}
			if s.stopping() {
				recordFrom(r.Context()).err = coalesce.ErrShutdown.Error()
				ew.fail(coalesce.ErrShutdown)
				return
			}
			if r.Context().Err() != nil {
				return // the client left; its context cancelled the call
			}
			cause := "upstream stream ended before its final event"
			if !errors.Is(err, io.EOF) {
				cause = err.Error()
			}
			recordFrom(r.Context()).err = cause
			ew.fail(err)
			return
		}
		if asm != nil {
			asm.Add(ev)
		}
		if o.format.IsEnd(ev) {
			done = true
		} else if o.onEvent != nil {
			o.onEvent(sse.Data(ev))
		}
		if !ew.send(o.skip, ev) {
			return // client gone; returning cancels the upstream call
		}
		if st != nil {
			st.sent(o.skip, [][]byte{ev})
		}
	}
}

// eventWriter writes an event stream to one client: headers that keep
// proxies from buffering and a flush after every batch. The write deadline
// that drops a client that stops reading (alone, instead of pinning its
// handler) is writeDeadline's, as for every answer.
type eventWriter struct {
	s      *Server
	w      http.ResponseWriter
	rc     *http.ResponseController
	format wire.Format
	// next is the sequence number after the events written so far (those
	// a follower does not receive included: the stream's numbering is the
	// leader's), which an error event that cuts the stream takes.
	next int64
}

// startEvents sends the stream's headers (already set ones kept) and
// counts it as open until close.
//
// The headers are written and flushed by a goroutine of their own while
// this one waits: a stream's handler goroutine lives as long as the
// stream, and net/http's header writing (a frame of nearly 3 KiB, then
// the sort of the header keys) at the bottom of the middleware chain took
// it past 8 KiB of stack, which doubled to 16 KiB for the stream's whole
// life: 8 KiB more per open stream than a bare reverse proxy (issue 20).
// The helper's stack is freed when it returns. The handoff is
// synchronous (the handler does nothing until the flush is done), so the
// ResponseWriter is never used by two goroutines at once, and a panic in
// the helper is raised again here, where the recoverer sees it as before.
func (s *Server) startEvents(w http.ResponseWriter, format wire.Format) *eventWriter {
	s.metrics.Streams(1)
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // tell nginx-style proxies not to buffer
	ew := &eventWriter{s: s, w: w, rc: http.NewResponseController(w), format: format}
	flushed := make(chan struct{})
	var panicked any
	go func() {
		defer close(flushed)
		defer func() { panicked = recover() }()
		w.WriteHeader(http.StatusOK)
		_ = ew.rc.Flush()
	}()
	<-flushed
	if panicked != nil {
		panic(panicked)
	}
	return ew
}

// send writes events, except those skip refuses (skip may be nil), and
// flushes; false means the client is gone.
func (ew *eventWriter) send(skip func([]byte) bool, events ...[]byte) bool {
	for _, ev := range events {
		ew.next = wire.NextSequence(ew.format, ew.next, ev)
		if skip != nil && skip(ev) {
			continue
		}
		if _, err := ew.w.Write(ev); err != nil {
			return false
		}
	}
	return ew.rc.Flush() == nil
}

// fail ends the stream with the format's error event for a stream broken
// by err, numbered after the events sent.
func (ew *eventWriter) fail(err error) {
	writeErrorEvent(ew.w, ew.format, statusError(&coalesce.StreamError{Err: err}), ew.next)
	_ = ew.rc.Flush()
}

// writeErrorEvent ends a stream of format on w with e's error event,
// numbered next where the format numbers its events, and names e's code
// in the access line. Every stream Corral cuts ends here.
func writeErrorEvent(w http.ResponseWriter, format wire.Format, e *apiError, next int64) {
	if sw := statusWriterOf(w); sw != nil {
		sw.code = e.Code
	}
	_, _ = w.Write(format.ErrorEvent(e.wire(), next))
}

func (ew *eventWriter) close() { ew.s.metrics.Streams(-1) }

func isEventStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

// onlyReader hides WriteTo so CopyBuffer uses the pooled buffer.
type onlyReader struct{ io.Reader }
