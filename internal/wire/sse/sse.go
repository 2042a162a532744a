// Package sse reads Server-Sent Events as the model APIs send them: whole
// events as raw bytes (so they can be relayed unchanged) and their data;
// and it frames the typed events Corral writes itself (Typed).
// Every API Corral serves streams this way; what the events mean is each
// wire format's business (internal/wire/...).
package sse

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// MaxEventBytes bounds one SSE event; a larger one is a broken upstream.
const MaxEventBytes = 4 << 20

// ErrEventTooLarge is returned by EventReader for an event over MaxEventBytes.
var ErrEventTooLarge = errors.New("sse: event too large")

// EventReader reads Server-Sent Events one whole event at a time.
type EventReader struct {
	br  *bufio.Reader
	buf []byte
}

// readBufferSize is the reader's buffer. Model streams send events of a
// few hundred bytes, and Next copies every event into its own buffer
// anyway, gathering one longer than this in pieces, so the read buffer
// only has to hold a typical event: every open stream keeps one for its
// whole life. 16 KiB was a sixth of a stream's memory; 4 KiB is one whole
// page, resident as soon as the first event lands in it, where 1 KiB
// shares its page with three others (issue 20).
const readBufferSize = 1 << 10

// NewEventReader reads events from r.
func NewEventReader(r io.Reader) *EventReader {
	return &EventReader{br: bufio.NewReaderSize(r, readBufferSize)}
}

// Next returns the next event's raw bytes, including the blank line that
// ends it, so they can be relayed unchanged. The slice is valid until the
// next call. At the end of the body Next returns io.EOF; a body that ends
// inside an event returns io.ErrUnexpectedEOF with the partial bytes.
func (er *EventReader) Next() ([]byte, error) {
	er.buf = er.buf[:0]
	// continued: line is the rest of a line longer than the read buffer,
	// whose start came in an earlier piece. Its rest can be a lone "\n"
	// (or "\r\n"), which is the line's end, not the blank line that ends
	// the event.
	continued := false
	for {
		line, err := er.br.ReadSlice('\n')
		if errors.Is(err, bufio.ErrBufferFull) {
			er.buf = append(er.buf, line...)
			if len(er.buf) > MaxEventBytes {
				return nil, ErrEventTooLarge
			}
			continued = true
			continue
		}
		whole := !continued
		continued = false
		er.buf = append(er.buf, line...)
		if len(er.buf) > MaxEventBytes {
			return nil, ErrEventTooLarge
		}
		if err != nil {
			if err == io.EOF {
				if len(bytes.TrimSpace(er.buf)) == 0 {
					return nil, io.EOF
				}
				return er.buf, io.ErrUnexpectedEOF
			}
			return er.buf, err
		}
		if whole && isBlank(line) {
			if len(er.buf) == len(line) {
				// Stray blank line between events: skip it.
				er.buf = er.buf[:0]
				continue
			}
			return er.buf, nil
		}
	}
}

func isBlank(line []byte) bool {
	return len(line) == 1 || (len(line) == 2 && line[0] == '\r')
}

// Data returns the concatenated data: field values of a raw event (joined
// with newlines, per the SSE specification).
func Data(event []byte) []byte {
	var out []byte
	n := 0
	for len(event) > 0 {
		var line []byte
		line, event, _ = bytes.Cut(event, []byte{'\n'})
		line = bytes.TrimSuffix(line, []byte{'\r'})
		v, ok := bytes.CutPrefix(line, []byte("data:"))
		if !ok {
			continue
		}
		v = bytes.TrimPrefix(v, []byte{' '})
		if n > 0 {
			out = append(out, '\n')
		}
		out = append(out, v...)
		n++
	}
	return out
}

// Type is a typed event's type: its "event:" line, or else the "type"
// member of its data (the Responses and Messages APIs send both).
func Type(event []byte) string {
	for line := range bytes.SplitSeq(event, []byte{'\n'}) {
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if t, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			return string(bytes.TrimSpace(t))
		}
	}
	var v struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(Data(event), &v)
	return v.Type
}

// Typed frames one typed event, "event: <typ>\ndata: <data>\n\n", as the
// Responses and Messages APIs send them. data must be one line (compact
// JSON); the returned slice is new and exactly as long as the event.
func Typed(typ string, data []byte) []byte {
	ev := make([]byte, 0, len(typ)+len(data)+16)
	ev = append(ev, "event: "...)
	ev = append(ev, typ...)
	ev = append(ev, "\ndata: "...)
	ev = append(ev, data...)
	return append(ev, "\n\n"...)
}

// Pieces cuts s into parts of at most max bytes on rune boundaries, for
// replaying stored text as deltas: no data line outgrows the fixed line
// buffers some SSE clients read into. An empty s is one empty piece, so
// every text has a delta.
func Pieces(s string, max int) []string {
	if len(s) <= max {
		return []string{s}
	}
	var out []string
	for len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return append(out, s)
}
