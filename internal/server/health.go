package server

import (
	"encoding/json"
	"net/http"
)

// handleHealthz answers while the process can serve HTTP at all.
func (s *Server) handleHealthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"status":"ok"}`))
}

// handleReadyz answers 200 when the gateway can take traffic, 503 when
// not, with detail (mode, Redis state) in the body either way.
func (s *Server) handleReadyz(w http.ResponseWriter, _ *http.Request) {
	ready, detail := true, map[string]any{}
	if s.ready != nil {
		ready, detail = s.ready()
	}
	body := map[string]any{"status": "ready"}
	for k, v := range detail {
		body[k] = v
	}
	status := http.StatusOK
	if !ready {
		status = http.StatusServiceUnavailable
		body["status"] = "not_ready"
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(body)
}
