package mockllm

import (
	"net/http"
	"strconv"
	"strings"
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

// anthropicModels is the model list in Anthropic's shape:
// {"data":[{"type":"model","id":...,"display_name":...,"created_at":...}],
// "has_more":false,"first_id":...,"last_id":...}.
func (s *Server) anthropicModels() []byte {
	type model struct {
		Type        string `json:"type"`
		ID          string `json:"id"`
		DisplayName string `json:"display_name"`
		CreatedAt   string `json:"created_at"`
	}
	list := struct {
		Data    []model `json:"data"`
		HasMore bool    `json:"has_more"`
		FirstID string  `json:"first_id"`
		LastID  string  `json:"last_id"`
	}{Data: make([]model, len(s.opts.Models))}
	for i, id := range s.opts.Models {
		list.Data[i] = model{Type: "model", ID: id, DisplayName: id, CreatedAt: "2025-01-01T00:00:00Z"}
	}
	if len(list.Data) > 0 {
		list.FirstID, list.LastID = list.Data[0].ID, list.Data[len(list.Data)-1].ID
	}
	return mustMarshal(list)
}
