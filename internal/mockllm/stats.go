package mockllm

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// Stats is a snapshot of the mock's counters. The /mock/ control endpoints
// are not counted.
type Stats struct {
	// Requests is the number of API requests received.
	Requests int64 `json:"requests"`
	// InFlight is the number of API requests not yet answered.
	InFlight int64 `json:"in_flight"`
	// Cancelled is the number of requests whose context ended (the client
	// went away) before the mock finished writing the answer.
	Cancelled int64 `json:"cancelled"`
	// Streams is the number of requests with "stream": true that got as far
	// as streaming.
	Streams int64 `json:"streams"`
	// Errors is the number of answers with an error status, injected or not.
	Errors int64 `json:"errors"`
	// Cuts is the number of answers cut short on purpose (mock-cut,
	// cut_after).
	Cuts int64 `json:"cuts"`
	// Paths counts requests per path; paths the mock does not serve are
	// counted under "other". Only non-zero counts are present.
	Paths map[string]int64 `json:"paths"`
	// Models counts requests per "model" field. At most maxModels distinct
	// names are kept; the rest are counted under "other".
	Models map[string]int64 `json:"models"`
}

// path is a served path, used as an index so that per-path counting needs
// no lock.
type path int

const (
	pathOther path = iota
	pathChat
	pathCompletions
	pathEmbeddings
	pathModels
	pathResponses
	pathMessages
	numPaths
)

var pathNames = [numPaths]string{
	pathOther:       "other",
	pathChat:        "/v1/chat/completions",
	pathCompletions: "/v1/completions",
	pathEmbeddings:  "/v1/embeddings",
	pathModels:      "/v1/models",
	pathResponses:   "/v1/responses",
	pathMessages:    "/v1/messages",
}

func pathOf(p string) path {
	switch p {
	case "/v1/chat/completions":
		return pathChat
	case "/v1/completions":
		return pathCompletions
	case "/v1/embeddings":
		return pathEmbeddings
	case "/v1/models":
		return pathModels
	case "/v1/responses":
		return pathResponses
	case "/v1/messages", "/v1/messages/count_tokens":
		return pathMessages
	}
	if id, ok := strings.CutPrefix(p, "/v1/models/"); ok && id != "" {
		return pathModels
	}
	return pathOther
}

// maxModels bounds the per-model map, so a client cannot grow it forever.
const maxModels = 1000

// counters are the live counters behind Stats.
type counters struct {
	requests, inFlight, cancelled, streams, errors, cuts atomic.Int64
	paths                                                [numPaths]atomic.Int64

	mu     sync.Mutex       // protects models and notify
	models map[string]int64 // model name → requests
	// notify is closed and cleared whenever a counter changes while waiters
	// is non-zero; Wait takes a fresh one before each look at the counters.
	notify  chan struct{}
	waiters atomic.Int64
}

func (c *counters) init() {
	c.models = make(map[string]int64)
}

func (c *counters) begin(p path) {
	c.requests.Add(1)
	c.paths[p].Add(1)
	c.inFlight.Add(1)
	c.changed()
}

func (c *counters) end(cancelled bool) {
	if cancelled {
		c.cancelled.Add(1)
	}
	c.inFlight.Add(-1)
	c.changed()
}

func (c *counters) model(name string) {
	c.mu.Lock()
	if _, ok := c.models[name]; !ok && len(c.models) >= maxModels {
		name = "other"
	}
	c.models[name]++
	c.mu.Unlock()
	c.changed()
}

// changed wakes the waiters. It must be called after the counter update it
// announces. A waiter registers (waiters.Add) before it reads the counters,
// so either it sees the update or this sees the waiter and wakes it; with no
// waiter, the common case, it costs one atomic load.
func (c *counters) changed() {
	if c.waiters.Load() == 0 {
		return
	}
	c.mu.Lock()
	if c.notify != nil {
		close(c.notify)
		c.notify = nil
	}
	c.mu.Unlock()
}

// next returns the channel closed by the next change.
func (c *counters) next() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.notify == nil {
		c.notify = make(chan struct{})
	}
	return c.notify
}

// Stats returns a snapshot of the counters.
func (s *Server) Stats() Stats {
	c := &s.stats
	st := Stats{
		Requests:  c.requests.Load(),
		InFlight:  c.inFlight.Load(),
		Cancelled: c.cancelled.Load(),
		Streams:   c.streams.Load(),
		Errors:    c.errors.Load(),
		Cuts:      c.cuts.Load(),
		Paths:     make(map[string]int64),
	}
	for i := range c.paths {
		if n := c.paths[i].Load(); n != 0 {
			st.Paths[pathNames[i]] = n
		}
	}
	c.mu.Lock()
	st.Models = make(map[string]int64, len(c.models))
	for k, v := range c.models {
		st.Models[k] = v
	}
	c.mu.Unlock()
	return st
}

// Reset sets every counter to zero, except InFlight, which keeps counting
// the requests still being answered.
func (s *Server) Reset() {
	c := &s.stats
	c.requests.Store(0)
	c.cancelled.Store(0)
	c.streams.Store(0)
	c.errors.Store(0)
	c.cuts.Store(0)
	for i := range c.paths {
		c.paths[i].Store(0)
	}
	c.mu.Lock()
	clear(c.models)
	c.mu.Unlock()
	c.changed()
}

// Wait blocks until cond holds for the counters, or ctx ends. It returns
// the snapshot that satisfied cond (or the last one seen, with ctx's
// error). cond is called with no lock held, each time a counter changes.
//
// Tests use it instead of sleeping, e.g. to know that N requests have
// reached the mock:
//
//	s.Wait(ctx, func(st mockllm.Stats) bool { return st.InFlight == 3 })
func (s *Server) Wait(ctx context.Context, cond func(Stats) bool) (Stats, error) {
	c := &s.stats
	c.waiters.Add(1)
	defer c.waiters.Add(-1)
	for {
		ch := c.next()
		st := s.Stats()
		if cond(st) {
			return st, nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return st, ctx.Err()
		}
	}
}

// WaitCancelled blocks until at least n requests have been cancelled by
// their client, or ctx ends.
func (s *Server) WaitCancelled(ctx context.Context, n int64) error {
	_, err := s.Wait(ctx, func(st Stats) bool { return st.Cancelled >= n })
	return err
}

func (s *Server) serveStats(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeErrorBody(w, http.StatusMethodNotAllowed, kindBadMethod, msgBadMethod, "")
		return
	}
	b := mustMarshal(s.Stats())
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

func (s *Server) serveReset(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeErrorBody(w, http.StatusMethodNotAllowed, kindBadMethod, msgBadMethod, "")
		return
	}
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}
