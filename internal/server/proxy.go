package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

// handleProxy forwards any other /v1 request untouched: no parsing, no
// cache. Authentication (and, when configured, requests/min) still apply.
func (s *Server) handleProxy(w http.ResponseWriter, r *http.Request) {
	body, aerr := readBody(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	req := upstream.Request{
		Method:   r.Method,
		Path:     strings.TrimPrefix(r.URL.Path, "/v1"),
		RawQuery: r.URL.RawQuery,
		Header:   r.Header,
	}
	if len(body) > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
		req.Body = body
	}
	s.forward(w, r, req)
}

// forward calls the upstream with the client's context (a client that
// hangs up cancels the call) and relays the answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, req upstream.Request) {
	rec := recordFrom(r.Context())
	start := time.Now()
	resp, err := s.up.Do(r.Context(), req)
	if err != nil {
		rec.upstreamMS = msSince(start)
		rec.err = err.Error()
		aerr := upstreamFailure(err)
		s.countForwarded(rec, outcomeOf(aerr), start)
		writeError(w, aerr)
		return
	}
	defer resp.Body.Close()
	s.relay(w, r, resp)
	rec.upstreamMS = msSince(start)
	s.countForwarded(rec, negcache.Classify(resp.StatusCode).String(), start)
}

// countForwarded counts a bypass or proxied request's upstream call.
func (s *Server) countForwarded(rec *logRecord, outcome string, start time.Time) {
	if rec.tenant == "" {
		return
	}
	s.metrics.Upstream(rec.tenant, rec.model, outcome, time.Since(start))
	s.usage.Add(rec.tenant, usage.Counters{UpstreamCalls: 1})
}

// outcomeOf names a failed call's outcome for metrics.
func outcomeOf(e *apiError) string {
	switch e {
	case errUpstreamTimeout:
		return "timeout"
	case errClientClosed:
		return "canceled"
	}
	return "error"
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
