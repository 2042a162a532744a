package upstream

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"

	"github.com/corralhq/corral/internal/redact"
)

// Kind says what went wrong with a call that produced no upstream status.
type Kind int

const (
	// Connect: the upstream could not be reached or the connection broke.
	Connect Kind = iota + 1
	// Timeout: the call ran past Options.Timeout.
	Timeout
	// Canceled: the caller's context ended (the client hung up).
	Canceled
)

func (k Kind) String() string {
	switch k {
	case Connect:
		return "connect"
	case Timeout:
		return "timeout"
	case Canceled:
		return "canceled"
	}
	return "unknown"
}

// Error is a failed call. Its message never includes the upstream key.
type Error struct {
	Kind Kind
	Err  error
}

func (e *Error) Error() string { return fmt.Sprintf("upstream: %s: %v", e.Kind, e.Err) }
func (e *Error) Unwrap() error { return e.Err }

// DialError marks a failure to connect: the request never left Corral, so
// it is the one failure that may be retried.
type DialError struct{ Err error }

func (e *DialError) Error() string { return "dial: " + e.Err.Error() }
func (e *DialError) Unwrap() error { return e.Err }

// errTimeout is the cause set on the call context when Options.Timeout fires.
var errTimeout = errors.New("upstream call timed out")

// KindOf returns the Kind of err, or 0 when err is not an upstream error.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// classify wraps err from a call made with ctx.
func classify(ctx context.Context, err error) error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	// net/http quotes the URL it called in its errors (password removed,
	// query kept); the error reaches the access log, and a base URL's or a
	// client's query can hold a key.
	var ue *url.Error
	if errors.As(err, &ue) {
		ue.URL = redact.URL(ue.URL)
	}
	switch {
	case errors.Is(context.Cause(ctx), errTimeout), errors.Is(ctx.Err(), context.DeadlineExceeded):
		// A deadline is Corral's own bound on the call (this client's, or
		// a caller's such as the failover router's whole-call timeout,
		// which may fire first): a timeout, never the client's cancel,
		// which the server answers with nothing.
		return &Error{Kind: Timeout, Err: errTimeout}
	case ctx.Err() != nil:
		return &Error{Kind: Canceled, Err: ctx.Err()}
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return &Error{Kind: Timeout, Err: err}
	}
	return &Error{Kind: Connect, Err: err}
}

// cancelBody releases the call's context when the body is closed, and
// classifies read errors (a stream cut short, a timeout mid-body).
type cancelBody struct {
	io.ReadCloser
	ctx    context.Context
	cancel context.CancelFunc
}

func (b *cancelBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		err = classify(b.ctx, err)
	}
	return n, err
}

func (b *cancelBody) Close() error {
	err := b.ReadCloser.Close()
	b.cancel()
	return err
}
