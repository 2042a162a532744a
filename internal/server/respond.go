package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/upstream"
)

// serveEntry answers from a complete entry: as JSON, or replayed as an
// event stream when the client asked for one.
func (s *Server) serveEntry(w http.ResponseWriter, r *http.Request, endpoint string, e *cache.Entry, source string, stored bool, req *keying.Request, ctl controls) {
	h := w.Header()
	for k, vv := range e.Header {
		h[k] = vv
	}
	setCacheHeaders(h, source, e, stored, ctl, s.now())
	if req.Stream && e.Status == http.StatusOK {
		if events, err := upstream.Replay(endpoint, e.Body, req.IncludeUsage); err == nil {
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Del("Content-Length")
			w.WriteHeader(http.StatusOK)
			for _, ev := range events {
				if _, err := w.Write(ev); err != nil {
					return
				}
			}
			return
		}
		// An entry that cannot be replayed as a stream (embeddings) is
		// answered as JSON, as the upstream would.
	}
	if h.Get("Content-Type") == "" {
		h.Set("Content-Type", "application/json")
	}
	if e.Status == http.StatusTooManyRequests && h.Get("Retry-After") == "" {
		ratelimit.SetRetryAfter(h, time.Second) // every 429 says when to retry
	}
	h.Set("Content-Length", strconv.Itoa(len(e.Body)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(e.Body)
}

// followStream relays a flight's stream record to one client, from the
// first event, then live. Each client has its own cursor, so a slow one
// slows nobody else. It reports whether the stream ended cleanly.
func (s *Server) followStream(w http.ResponseWriter, r *http.Request, st *flightState, source string, includeUsage bool, ctl controls) bool {
	h := w.Header()
	for k, vv := range st.header {
		h[k] = vv
	}
	setCacheHeaders(h, source, nil, false, ctl, s.now())
	ew := s.startEvents(w)
	defer ew.close()
	cur := st.rec.Cursor()
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
		var skip func([]byte) bool
		if !includeUsage {
			skip = isUsageEvent
		}
		if !ew.send(skip, batch...) {
			return false
		}
	}
}

// isUsageEvent reports whether ev is the usage-only chunk a stream sends
// when include_usage is set: no choices, a usage object. Only events that
// mention usage are decoded, whatever their JSON spacing.
func isUsageEvent(ev []byte) bool {
	// Every chunk of a stream that asked for usage carries "usage":null;
	// only one with a usage object can be the usage chunk.
	if !bytes.Contains(ev, []byte(`"usage":{`)) && !bytes.Contains(ev, []byte(`"usage": {`)) {
		return false
	}
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if json.Unmarshal(upstream.Data(ev), &chunk) != nil {
		return false
	}
	return chunk.Choices != nil && len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}
