package coalesce

import (
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/wire"
)

// Request is what the leader's request contributes to its flight.
type Request struct {
	// Tenant names whose prompt this is in the flight's keys: the
	// tenant's Scope (its id, and for an API tenant its generation).
	Tenant   string
	Hash     string // the prompt's key hash (keying)
	Endpoint string // the API path below /v1
	Query    string // the client's query string, sent as it came
	Model    string
	Format   wire.Format

	// Stream: the leader's client streams. In distributed mode its lookup
	// then rides the lock's round trip (see Coalescer.Lookup).
	Stream bool
	// Relays: the leader's request writes the stream to its client on
	// this instance and calls Flight.Relayed once its first write is out
	// (or it wrote none). Until then the live stream for the other
	// instances waits, so that the client is written before Redis
	// (awaitRelayed). False: the live stream is published at once.
	Relays      bool
	NoCache     bool      // the leader asked for a fresh upstream answer
	MinStoredAt time.Time // entries stored before this are not served
	TTL         time.Duration
	NegativeTTL time.Duration
	// StaleWhileRevalidate and StaleIfError are the tenant's stale windows
	// (0 = off): a positive entry is stored for TTL plus the larger of them
	// (entry.StoreTTL) and keeps TTL as its own, so it knows when it stops
	// being fresh.
	StaleWhileRevalidate time.Duration
	StaleIfError         time.Duration
	// Refresh: this flight refreshes an entry served stale, in the
	// background. It calls upstream only if it takes the lock; when
	// another flight holds it, that one is the refresh.
	Refresh bool

	// Body is sent upstream; Original is the client's body when Body was
	// prepared from it (wire.Format.Prepare), else nil.
	Body     []byte
	Original []byte
	Header   map[string][]string // the leader's request headers, cloned

	// Upstream pins the call to one upstream (the one holding an object
	// the request names, such as a previous_response_id); "" routes by
	// API and model.
	Upstream string

	// Span is the leader request's flight span (telemetry.SpanFlight),
	// nil when the request is not traced: the flight's steps (the lock
	// wait, the upstream attempts) are its children, and a flight that
	// ends up following another instance's leader marks it so and links
	// it to the leader's span. Its context travels in the lock's value.
	Span trace.Span

	Leaders    Leaders // the tenant's semaphore of upstream calls
	MaxLeaders int
	Tokens     Tokens // nil: no tokens/min limit
	// Estimate is the call's token estimate (wire.Facts.Estimate), which
	// the Observer charges for an answer whose usage cannot be read.
	Estimate int
}

// Source is where an answer came from, as X-Corral-Cache names it.
type Source uint8

const (
	// Miss: this flight called upstream (the zero value: a flight that
	// failed before answering was still a miss).
	Miss Source = iota
	// Hit: a stored answer.
	Hit
	// Negative: a remembered deterministic failure.
	Negative
	// Coalesced: another request's call answered, on this instance or
	// another.
	Coalesced
	// Stale: a stored answer past its TTL, within a stale window.
	Stale
)

func (s Source) String() string {
	switch s {
	case Miss:
		return "MISS"
	case Hit:
		return "HIT"
	case Negative:
		return "NEGATIVE"
	case Coalesced:
		return "COALESCED"
	case Stale:
		return "STALE"
	}
	return "Source(" + strconv.Itoa(int(s)) + ")"
}

// storedSource is the one decision of what a stored entry found by a
// flight is to its caller: a remembered failure, or an answer that is a
// hit, unless the flight waited for another instance's leader, whose
// answer it is.
func storedSource(negative, waited bool) Source {
	switch {
	case waited:
		return Coalesced
	case negative:
		return Negative
	}
	return Hit
}

// Outcome is a flight's answer.
type Outcome struct {
	// Entry is the answer: a 200, or an upstream error passed through.
	// Nil when the flight ended with an error.
	Entry  *entry.Entry
	Source Source
	// Stored reports that this flight stored Entry.
	Stored bool
	// Upstream is how long the upstream call took (0 when none was made).
	Upstream time.Duration
}

// Errors a flight ends with. Errors from Caller.Call and Tokens.Take are
// returned as they are.
var (
	// ErrUpstreamAuth: the upstream refused Corral's own credential (401
	// or 403). Never the client's fault.
	ErrUpstreamAuth = errors.New("coalesce: the upstream refused the gateway's credential")
	// ErrTooLarge: the upstream answer was larger than Options.MaxBody.
	ErrTooLarge = errors.New("coalesce: upstream answer too large")
	// ErrWaitTimeout: another instance's call did not finish within
	// WaitTimeout and Options.FailOnWaitTimeout is set.
	ErrWaitTimeout = errors.New("coalesce: timed out waiting for another instance's call")
	// ErrLeaderGone: the instance streaming the answer stopped renewing its
	// lock before finishing.
	ErrLeaderGone = errors.New("the instance streaming this answer stopped before finishing")
	// ErrShutdown: the flight was ended by Stop, because this instance is
	// shutting down.
	ErrShutdown = errors.New("coalesce: the gateway instance is shutting down")
	// ErrStreamIncomplete: a stream ended before its final event.
	ErrStreamIncomplete = errors.New("upstream stream ended before it was complete")

	// ErrLiveStreamGap ends a live stream whose leader could not write
	// some of its events to Redis: its followers on other instances would
	// otherwise miss them.
	ErrLiveStreamGap = errors.New("coalesce: the live stream lost events")
	// errFlightEnded closes a stream record its flight abandoned.
	errFlightEnded = errors.New("flight ended before the stream completed")
)

// ConcurrencyError: the tenant's leader semaphore stayed full for the
// whole LeaderWait.
type ConcurrencyError struct{ Max int }

func (e *ConcurrencyError) Error() string {
	return "coalesce: tenant concurrency limit " + strconv.Itoa(e.Max) + " reached"
}

// StreamError: an event stream (the upstream's, or another instance's
// live stream) broke after it started; Err says why.
type StreamError struct{ Err error }

func (e *StreamError) Error() string { return "coalesce: stream broke: " + e.Err.Error() }
func (e *StreamError) Unwrap() error { return e.Err }
