package mockllm

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

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

const (
	// createdAt is created in RFC 3339, for Anthropic's shapes.
	createdAt = "2025-01-01T00:00:00Z"

	// defaultModelPage and maxModelPage are Anthropic's default and
	// largest page of GET /v1/models.
	defaultModelPage = 20
	maxModelPage     = 1000
)

// serveModels answers GET /v1/models and GET /v1/models/{id}: in
// Anthropic's shapes when the request carries anthropic-version (as
// Anthropic's SDKs and Claude Code send it), else in OpenAI's, from JSON
// built once by New.
func (s *Server) serveModels(w http.ResponseWriter, r *http.Request) {
	ant := r.Header.Get("Anthropic-Version") != ""
	var b []byte
	if id, ok := strings.CutPrefix(r.URL.Path, "/v1/models/"); ok {
		base, known := s.knownModel(id)
		switch {
		case !known && ant:
			s.writeAnthropicError(w, http.StatusNotFound, "model: "+id)
			return
		case !known:
			s.writeStatus(w, http.StatusNotFound, id)
			return
		case ant:
			b = mustMarshal(anthropicModel(id, base))
		case base == id:
			b = s.models[id]
		default:
			b = mustMarshal(model{ID: id, Object: "model", Created: created, OwnedBy: "corral-mock"})
		}
	} else if ant {
		page, msg := s.anthropicModels(r)
		if msg != "" {
			s.writeAnthropicError(w, http.StatusBadRequest, msg)
			return
		}
		b = mustMarshal(page)
	} else {
		b = s.modelsJSON
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// knownModel reports whether GET /v1/models/{id} finds id: a listed model,
// or the -tool variant of one (or mock-tool), which answers as its base
// model with tool calls. base is the listed model id stands for.
func (s *Server) knownModel(id string) (base string, ok bool) {
	if _, ok := s.models[id]; ok {
		return id, true
	}
	if id == toolModel {
		return id, true
	}
	if b, cut := strings.CutSuffix(id, toolSuffix); cut {
		if _, ok := s.models[b]; ok {
			return b, true
		}
	}
	return "", false
}

// anthropicModels is one page of the model list in Anthropic's shape, as
// the request's limit (1..1000, default 20), after_id and before_id
// select it; msg is the complaint about a bad parameter.
func (s *Server) anthropicModels(r *http.Request) (page anthropic.ModelList, msg string) {
	q := r.URL.Query()
	limit := defaultModelPage
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxModelPage {
			return page, "limit: must be between 1 and 1000"
		}
		limit = n
	}
	ids := s.opts.Models
	from, to := 0, len(ids)
	if after := q.Get("after_id"); after != "" {
		i := slices.Index(ids, after)
		if i < 0 {
			return page, "after_id: no model " + after
		}
		from = i + 1
	}
	if before := q.Get("before_id"); before != "" {
		i := slices.Index(ids, before)
		if i < 0 {
			return page, "before_id: no model " + before
		}
		to = i
		from = max(from, to-limit)
	}
	from = min(from, to)
	end := min(from+limit, to)
	page = anthropic.ModelList{Data: make([]anthropic.Model, 0, end-from)}
	for _, id := range ids[from:end] {
		page.Data = append(page.Data, anthropicModel(id, id))
	}
	page.HasMore = end < to || (q.Get("before_id") != "" && from > 0)
	if n := len(page.Data); n > 0 {
		page.FirstID, page.LastID = &page.Data[0].ID, &page.Data[n-1].ID
	}
	return page, ""
}

// anthropicModel is id in Anthropic's model shape, displayed as base is
// (a -tool variant as the model it varies).
func anthropicModel(id, base string) anthropic.Model {
	return anthropic.Model{Type: "model", ID: id, DisplayName: displayName(base), CreatedAt: createdAt}
}

// displayName is a model's human-readable name as Anthropic writes it:
// "claude-sonnet-5-5" and "claude-sonnet-4-5-20250929" are "Claude Sonnet
// 5.5" and "Claude Sonnet 4.5"; a name that is not Claude's is its id.
func displayName(id string) string {
	rest, ok := strings.CutPrefix(id, "claude-")
	if !ok {
		return id
	}
	parts := strings.Split(rest, "-")
	if len(parts[len(parts)-1]) == 8 && allDigits(parts[len(parts)-1]) {
		parts = parts[:len(parts)-1] // a snapshot date
	}
	words := []string{"Claude"}
	var version []string
	for _, p := range parts {
		if allDigits(p) {
			version = append(version, p)
			continue
		}
		r, n := utf8.DecodeRuneInString(p)
		words = append(words, string(unicode.ToUpper(r))+p[n:])
	}
	if len(version) > 0 {
		words = append(words, strings.Join(version, "."))
	}
	return strings.Join(words, " ")
}

func allDigits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}
