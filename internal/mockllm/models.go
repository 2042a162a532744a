package mockllm

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/wire/anthropic"
)

type modelList struct {
	Object string  `json:"object"`
	Data   []model `json:"data"`
}

type model struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

// serveModels answers GET /v1/models and GET /v1/models/{id} from JSON
// built once by New.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	b := s.modelsJSON
	if r.Header.Get("Anthropic-Version") != "" && r.URL.Path == "/v1/models" {
		b = s.anthropicModels() // Anthropic's list shape, as its API answers
	}
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok {
		if b, ok = s.models[id]; !ok {
			s.writeStatus(w, http.StatusNotFound, id)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// anthropicModels is the model list in Anthropic's shape.
func (s *Server) anthropicModels() []byte {
	return mustMarshal(anthropic.NewModelList(s.opts.Models, "2025-01-01T00:00:00Z"))
}
