package server

import (
	"errors"
	"io"
	"maps"
	"net/http"
	"runtime"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/wire"
)

// jsonType is Content-Type: application/json as a header value, shared
// (see cacheValues).
var jsonType = []string{"application/json"}

// serveEntry answers from a complete entry: as JSON, or replayed as an
// event stream when the client asked for one. It writes from the entry's
// own bytes, shared with every other reader: a client that stops reading
// holds no copy of the answer.
func (s *Server) serveEntry(w http.ResponseWriter, c *call, e *entry.Entry, source string, stored bool) {
	// A Redis entry is shared while the entry itself is reachable, not
	// only its body (cache.UnmarshalShared), and so is its replay
	// (replays): keep it so until it is written.
	defer runtime.KeepAlive(e)
	h := w.Header()
	maps.Copy(h, e.Header)
	if source != cacheMiss && source != cacheCoalesced {
		h.Del(failover.UpstreamHeader) // a stored answer was produced by no upstream now
		h.Del(failover.ProviderHeader)
	}
	setCacheHeaders(h, source, e, stored, c.ctl, s.now())
	if c.facts.Stream && e.Status == http.StatusOK {
		// Every streaming reader of e writes from one rendering
		// (replays), as every reader writes e.Body itself.
		if r := s.replays.get(c, e); r.err == nil {
			defer runtime.KeepAlive(r) // shared while this client is written
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Del("Content-Length")
			w.WriteHeader(http.StatusOK)
			var next int64 // the sequence number after the events replayed
			for _, ev := range r.events {
				if s.stopping() {
					s.replayStopped(w, c, next)
					return
				}
				if _, err := w.Write(ev); err != nil {
					return
				}
				next = wire.NextSequence(c.format, next, ev)
			}
			return
		}
		// An entry that cannot be replayed as a stream (embeddings) is
		// answered as JSON, as the upstream would.
	}
	if header(h, "Content-Type") == "" {
		h["Content-Type"] = jsonType
	}
	if e.Status == http.StatusTooManyRequests && header(h, "Retry-After") == "" {
		ratelimit.SetRetryAfter(h, time.Second) // every 429 says when to retry
	}
	h["Content-Length"] = []string{strconv.Itoa(len(e.Body))}
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body)
}

// followStream relays a flight's stream to one client, from the first
// event, then live. Each client has its own cursor, so a slow one slows
// nobody else. It reports whether the stream ended cleanly.
//
// The headers are set by followHeaders, written by startEvents (net/http's
// writeHeader, a frame of nearly 3 KiB, runs under it) and the events by
// followCursor, each from this small frame and none under another: this
// goroutine stays below the stream for its whole life, and one crossing
// of 8 KiB would double its stack for good (issue 20).
func (s *Server) followStream(w http.ResponseWriter, r *http.Request, c *call, f *coalesce.Flight, source string) bool {
	s.followHeaders(w, c, f, source)
	ew := s.startEvents(w, c.format)
	defer ew.close()
	return s.followCursor(r, c, f, ew)
}

// followHeaders sets a followed stream's headers.
//
//go:noinline
func (s *Server) followHeaders(w http.ResponseWriter, c *call, f *coalesce.Flight, source string) {
	h := w.Header()
	maps.Copy(h, f.Header())
	setCacheHeaders(h, source, nil, false, c.ctl, s.now())
}

// followCursor writes the flight's events to ew as they come.
//
//go:noinline
func (s *Server) followCursor(r *http.Request, c *call, f *coalesce.Flight, ew *eventWriter) bool {
	st := s.startStream(r.Context())
	defer st.end()
	cur := f.Cursor()
	skip := c.format.Hidden(c.facts)
	for {
		batch, err := cur.Next(r.Context())
		if err != nil {
			if errors.Is(err, io.EOF) {
				return true
			}
			if r.Context().Err() != nil {
				return false
			}
			recordFrom(r.Context()).err = err.Error()
			ew.fail(err)
			return false
		}
		sent := ew.send(skip, batch...)
		// The first write is out (or failed): the leader's publisher may
		// now send the stream to the other instances.
		f.Relayed()
		if !sent {
			return false
		}
		st.sent(skip, batch)
	}
}
