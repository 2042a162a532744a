// Package livestream carries a streamed answer between gateway instances
// while it is being generated, so that a follower on any instance sees its
// first token as soon as the leader's client does.
//
// The leader appends each SSE event to a Redis Stream
// (corral:v1:{<tenant>:<hash>}:s) and finally an end marker; a follower
// instance reads the stream from the start and then blocks for more
// (XREAD BLOCK). The stream is capped in length and expires shortly after
// its end, so an abandoned one never lingers.
//
// Each instance runs one reader per stream (its flight for that prompt)
// and fans the events out to its local followers through a
// coalesce.Record, so a thousand followers cost one blocking read.
package livestream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// Options tune a Streams. Zero values take the documented defaults.
type Options struct {
	// MaxLen caps a stream's entries (approximate trimming). Default
	// 100,000 events, far beyond any model answer.
	MaxLen int64
	// LiveTTL is the stream's expiry while it is being written, renewed on
	// every append. Default 2 minutes.
	LiveTTL time.Duration
	// EndTTL is the expiry set when the stream ends: long enough for a
	// late reader to finish, short enough to free memory. Default 30s.
	EndTTL time.Duration
	// OpTimeout bounds one append or end. Default 1s.
	OpTimeout time.Duration
}

// Streams reads and writes live streams in Redis.
type Streams struct {
	rdb  redis.UniversalClient
	opts Options
}

// New returns a Streams on rdb.
func New(rdb redis.UniversalClient, opts Options) *Streams {
	if opts.MaxLen <= 0 {
		opts.MaxLen = 100_000
	}
	if opts.LiveTTL <= 0 {
		opts.LiveTTL = 2 * time.Minute
	}
	if opts.EndTTL <= 0 {
		opts.EndTTL = 30 * time.Second
	}
	if opts.OpTimeout <= 0 {
		opts.OpTimeout = time.Second
	}
	return &Streams{rdb: rdb, opts: opts}
}

// Field names of stream entries.
const (
	fieldEvent    = "e"   // one raw SSE event
	fieldUpstream = "u"   // on the first event: the upstream answering (X-Corral-Upstream)
	fieldProvider = "p"   // on the first event: who runs it (X-Corral-Provider); readers that know no "p" ignore it
	fieldEnd      = "end" // "ok", or the reason the stream broke
	endOK         = "ok"
)

// ErrBroken is the end of a stream that did not complete; the reason is
// wrapped.
var ErrBroken = errors.New("livestream: leader's stream broke")

// Append adds events in one round trip (a pipeline of XADDs and one
// PEXPIRE).
func (s *Streams) Append(ctx context.Context, key string, events [][]byte) error {
	return s.appendEvents(ctx, key, "", "", events)
}

// Start is a stream's first Append: its first event also records the
// upstream answering it and its provider (empty: none named), which a
// reader on another instance gets in Batch.Upstream and Batch.Provider
// and shows its clients as the leader's clients are shown them. Same
// round trip.
func (s *Streams) Start(ctx context.Context, key, upstream, provider string, events [][]byte) error {
	return s.appendEvents(ctx, key, upstream, provider, events)
}

func (s *Streams) appendEvents(ctx context.Context, key, upstream, provider string, events [][]byte) error {
	if len(events) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, ev := range events {
			values := []any{fieldEvent, ev}
			if i == 0 && upstream != "" {
				values = append(values, fieldUpstream, upstream)
			}
			if i == 0 && provider != "" {
				values = append(values, fieldProvider, provider)
			}
			p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: s.opts.MaxLen, Approx: true, Values: values})
		}
		p.PExpire(ctx, key, s.opts.LiveTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("livestream: append: %w", err)
	}
	return nil
}

// End marks the stream finished: cleanly when cause is nil. The stream
// then expires after EndTTL.
func (s *Streams) End(ctx context.Context, key string, cause error) error {
	v := endOK
	if cause != nil {
		v = cause.Error()
		if v == endOK || v == "" {
			v = "broken"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	_, err := s.rdb.Pipelined(ctx, func(p redis.Pipeliner) error {
		p.XAdd(ctx, &redis.XAddArgs{Stream: key, MaxLen: s.opts.MaxLen, Approx: true, Values: []any{fieldEnd, v}})
		p.PExpire(ctx, key, s.opts.EndTTL)
		return nil
	})
	if err != nil {
		return fmt.Errorf("livestream: end: %w", err)
	}
	return nil
}

// Batch is what one Read returns.
type Batch struct {
	Events [][]byte
	Next   string // the id to read after next time
	Ended  bool   // the end marker was read
	Err    error  // with Ended: nil for a clean end, else wraps ErrBroken
	// Reason is, with Err, the text the leader's End wrote: its cause.
	Reason string
	// Upstream and Provider are what the leader's Start recorded, when
	// this batch holds the stream's first event.
	Upstream string
	Provider string
}

// Read returns the entries after id ("0" for the start), blocking up to
// block for new ones. An empty batch with no error means nothing arrived
// within block.
func (s *Streams) Read(ctx context.Context, key, after string, block time.Duration) (Batch, error) {
	b := Batch{Next: after}
	// The read may block for `block`; give the round trip room beyond it.
	ctx, cancel := context.WithTimeout(ctx, block+s.opts.OpTimeout)
	defer cancel()
	res, err := s.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{key, after}, Count: 1024, Block: block}).Result()
	if errors.Is(err, redis.Nil) {
		return b, nil
	}
	if err != nil {
		return b, fmt.Errorf("livestream: read: %w", err)
	}
	for _, st := range res {
		for _, m := range st.Messages {
			b.Next = m.ID
			if v, ok := m.Values[fieldEvent].(string); ok {
				b.Events = append(b.Events, []byte(v))
				if u, ok := m.Values[fieldUpstream].(string); ok {
					b.Upstream = u
				}
				if p, ok := m.Values[fieldProvider].(string); ok {
					b.Provider = p
				}
				continue
			}
			if v, ok := m.Values[fieldEnd].(string); ok {
				b.Ended = true
				if v != endOK {
					b.Err, b.Reason = fmt.Errorf("%w: %s", ErrBroken, v), v
				}
				return b, nil
			}
		}
	}
	return b, nil
}

// Clear deletes key's stream: a new leader removes its predecessor's so
// that followers never mirror an answer from an earlier attempt.
func (s *Streams) Clear(ctx context.Context, key string) error {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	if err := s.rdb.Del(ctx, key).Err(); err != nil {
		return fmt.Errorf("livestream: clear: %w", err)
	}
	return nil
}

// State is what the end of a stream says about the attempt that wrote it.
type State int

const (
	// Absent: no stream.
	Absent State = iota
	// Live: events and no end marker yet.
	Live
	// Done: ended cleanly.
	Done
	// Broken: ended with a failure; followers joining now would only
	// replay it.
	Broken
)

// Peek reports the stream's state from its last entry (XREVRANGE COUNT 1),
// so a waiter can tell a live stream worth following from an attempt that
// already failed.
func (s *Streams) Peek(ctx context.Context, key string) (State, error) {
	ctx, cancel := context.WithTimeout(ctx, s.opts.OpTimeout)
	defer cancel()
	msgs, err := s.rdb.XRevRangeN(ctx, key, "+", "-", 1).Result()
	if err != nil {
		return Absent, fmt.Errorf("livestream: peek: %w", err)
	}
	if len(msgs) == 0 {
		return Absent, nil
	}
	v, ended := msgs[0].Values[fieldEnd].(string)
	switch {
	case !ended:
		return Live, nil
	case v == endOK:
		return Done, nil
	}
	return Broken, nil
}
