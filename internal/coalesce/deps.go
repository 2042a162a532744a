package coalesce

import (
	"context"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/wire"
)

// Store holds answers and remembered failures (cache.Memory, cache.Redis).
type Store interface {
	// GetMany reads keys in one round trip; a missing key is nil.
	GetMany(ctx context.Context, keys ...string) ([]*entry.Entry, error)
	// Set stores e for ttl; entry.ErrNotCacheable means it was refused.
	Set(ctx context.Context, key string, e *entry.Entry, ttl time.Duration) error
	// Delete removes keys; absent keys are not an error.
	Delete(ctx context.Context, keys ...string) error
}

// Marker sets short-lived markers shared by every instance: the backoff
// between background refreshes of one stale entry.
type Marker interface {
	// Mark sets name for ttl unless it is set; ok=false means it was.
	Mark(ctx context.Context, name string, ttl time.Duration) (ok bool, err error)
}

// Release gives a held lock back; a lock is renewed until released.
type Release func(ctx context.Context) error

// Locker is the cross-instance leader lock: one holder per name at a time.
type Locker interface {
	// TryAcquire takes name if nobody holds it; ok=false means another
	// holds it. Taking it deletes clear (the previous leader's stream and
	// failure).
	TryAcquire(ctx context.Context, name string, clear ...string) (release Release, ok bool, err error)
	// TryAcquireOrRead reads keys and takes name only when none of them
	// holds a usable entry, in one round trip; found are the entries read
	// (nil where absent). Taking it deletes clear.
	TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (release Release, ok bool, found []*entry.Entry, err error)
	// Holder is the token of whoever holds name, "" when nobody does.
	Holder(ctx context.Context, name string) (string, error)
}

// Bus carries "done" notices between instances.
type Bus interface {
	// Watch returns a channel closed when name is announced done; cancel
	// must be called when the watcher stops.
	Watch(name string) (ch <-chan struct{}, cancel func())
	Publish(ctx context.Context, name string) error
}

// Streams carries a live stream between instances.
type Streams interface {
	// Start adds a stream's first events, recording the upstream that
	// answers it and its provider (empty: none named) for the readers'
	// header.
	Start(ctx context.Context, key string, origin StreamOrigin, events [][]byte) error
	// Append adds events to key's stream.
	Append(ctx context.Context, key string, events [][]byte) error
	// End marks the stream finished; cleanly when cause is nil.
	End(ctx context.Context, key string, cause error) error
	// Read returns the events after the id after ("0": from the start),
	// blocking up to block for new ones.
	Read(ctx context.Context, key, after string, block time.Duration) (StreamBatch, error)
	// Followable reports a stream worth following: live, or ended cleanly.
	Followable(ctx context.Context, key string) (bool, error)
	// Drop removes key's stream.
	Drop(ctx context.Context, key string) error
}

// StreamBatch is what one Streams.Read returns.
type StreamBatch struct {
	Events [][]byte
	Next   string // the id to read after next time
	Ended  bool   // the end marker was read
	Err    error  // with Ended: nil for a clean end, else why it broke
	// Upstream and Provider are what its Start recorded, in the batch
	// holding the first event.
	Upstream string
	Provider string
}

// StreamOrigin names who answers a live stream: the upstream and its
// provider, as X-Corral-Upstream and X-Corral-Provider show them ("":
// none named).
type StreamOrigin struct {
	Upstream string
	Provider string
}

// Health is Redis's health as the instance sees it (internal/breaker):
// Allow before a Redis call, Record its outcome.
type Health interface {
	Allow() bool
	Record(err error)
}

// Caller makes a flight's one upstream call (the server, over HTTP).
type Caller interface {
	// Call sends req upstream. An error is a call that produced no
	// response (timeout, connection); the flight returns it as it is.
	Call(ctx context.Context, req *Request) (*Response, error)
}

// Response is an upstream answer as the flight needs it.
type Response struct {
	Status int
	// Header is what the client may see (hop-by-hop and credentials
	// removed); Kept is what a stored entry keeps (entry.KeepHeaders).
	Header, Kept map[string][]string
	// EventStream is true for a text/event-stream body.
	EventStream bool
	Body        io.ReadCloser
	// Changed reports that the body sent was the prepared one, not the
	// client's (wire.Format.Prepare): a 400 to it is not remembered.
	Changed bool
	// Finished, when set, is told a positive answer once it is whole (the
	// body read, or the stream assembled) with its usage, before Body is
	// closed: the upstream attempt's span records the tokens. Nil: nobody
	// is told.
	Finished func(body []byte, u wire.Usage)
}

// LeaderSpans is a Locker whose lock carries the span of the flight that
// holds it (coalesce/redisflight), so that a flight waiting for another
// instance's leader links its span to that leader's: a coalesced
// request's trace shows whose call it waited for.
type LeaderSpans interface {
	// HolderSpan is the span of name's holder; an invalid SpanContext
	// when nobody holds it or the holder carried none.
	HolderSpan(ctx context.Context, name string) (trace.SpanContext, error)
}

// Observer is told what flights do, for metrics and usage.
type Observer interface {
	// Called reports one upstream call: what it answered (out, err) and
	// how long it took.
	Called(req *Request, out Outcome, err error, d time.Duration)
	// TookOver reports a lock taken over from a leader that left without
	// an answer.
	TookOver()
}

// Tokens is a tenant's tokens/min budget for one request: taken only by a
// flight that goes upstream (hits and followers cost nothing).
type Tokens interface {
	// Take charges the estimate; an error refuses the call and is the
	// flight's error (the HTTP layer renders it).
	Take(ctx context.Context) error
	// Charge charges what real usage exceeded the estimate by.
	Charge(ctx context.Context, actual int)
}

// Leaders is a tenant's per-instance semaphore of upstream calls
// (*semaphore.Weighted).
type Leaders interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}
