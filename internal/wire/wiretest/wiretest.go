// Package wiretest holds what the wire formats' tests share: a replayed
// stream handed to an official SDK's decoder as the HTTP response it
// reads, and events run through a format's Assembler as the request path
// runs them. Each format checks its own events against its own SDK; only
// this plumbing is common.
package wiretest

import (
	"bytes"
	"io"
	"net/http"

	"github.com/corralhq/corral/internal/wire"
)

// EventStream is a 200 text/event-stream response whose body is events
// back to back, the form an SDK's stream decoder reads.
func EventStream(events [][]byte) *http.Response {
	return &http.Response{StatusCode: 200, Header: http.Header{"Content-Type": {"text/event-stream"}},
		Body: io.NopCloser(bytes.NewReader(bytes.Join(events, nil)))}
}

// Assemble adds events, in order, to f's Assembler for endpoint and
// returns what its Finish returns.
func Assemble[E ~[]byte | ~string](f wire.Format, endpoint string, events []E) ([]byte, wire.Usage, error) {
	a := f.NewAssembler(endpoint)
	for _, ev := range events {
		a.Add([]byte(ev))
	}
	return a.Finish()
}
