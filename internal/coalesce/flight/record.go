package flight

import (
	"context"
	"io"
	"sync"
)

// Record is an append-only log of a streamed answer's events, written by
// one producer and read by any number of cursors, each at its own pace.
// The producer never waits for a reader; memory is the answer itself.
type Record struct {
	mu     sync.Mutex    // protects the fields below
	events [][]byte      // appended, never modified
	closed bool          // no more events
	err    error         // why the stream ended, nil when it ended cleanly
	wake   chan struct{} // closed (and replaced) on every Append and on Close
}

// NewRecord returns an empty, open record.
func NewRecord() *Record { return &Record{wake: make(chan struct{})} }

// Append adds one event. The record keeps ev: the caller must not modify
// it afterwards. Appends after Close are ignored.
func (r *Record) Append(ev []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.events = append(r.events, ev)
	close(r.wake)
	r.wake = make(chan struct{})
}

// Close ends the record; err nil means the stream ended cleanly. Only the
// first Close counts.
func (r *Record) Close(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed, r.err = true, err
	close(r.wake)
}

// Len is the number of events appended so far.
func (r *Record) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.events)
}

// Cursor returns a reader positioned at the first event.
func (r *Record) Cursor() *Cursor { return &Cursor{r: r} }

// Cursor reads a Record from the start, then follows it live. A cursor
// belongs to one reader.
type Cursor struct {
	r *Record
	i int
}

// Ready returns a channel that is closed once Next has something to
// return without waiting: an event past the cursor, or the record's end.
// It lets a reader wait for the record or for something else, whichever
// comes first.
func (c *Cursor) Ready() <-chan struct{} {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.i < len(c.r.events) || c.r.closed {
		return closedChan
	}
	return c.r.wake
}

// closedChan is Ready's answer when Next would not wait.
var closedChan = func() chan struct{} {
	ch := make(chan struct{})
	close(ch)
	return ch
}()

// Next returns every event appended since the last call, waiting while
// there are none. Returning a batch lets a late joiner write what it
// missed in one go. After the last event it returns io.EOF when the
// stream ended cleanly, or the record's error.
func (c *Cursor) Next(ctx context.Context) ([][]byte, error) {
	for {
		c.r.mu.Lock()
		if c.i < len(c.r.events) {
			batch := c.r.events[c.i:len(c.r.events):len(c.r.events)]
			c.i = len(c.r.events)
			c.r.mu.Unlock()
			return batch, nil
		}
		if c.r.closed {
			err := c.r.err
			c.r.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return nil, err
		}
		wake := c.r.wake
		c.r.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
