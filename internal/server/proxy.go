package server

import (
	"net/http"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/upstream"
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
		writeError(w, upstreamFailure(err))
		return
	}
	defer resp.Body.Close()
	s.relay(w, r, resp)
	rec.upstreamMS = msSince(start)
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
