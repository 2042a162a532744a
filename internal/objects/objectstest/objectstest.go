// Package objectstest is a fake OpenAI upstream for stored objects: files
// (multipart upload, list, read, content, delete), batches (create, read,
// cancel, list) and stored responses (create, streamed or not, read,
// input items, cancel, delete, previous_response_id). It keeps one shared
// account, as the real upstream does for every tenant behind Corral, and
// records every call so tests can prove what never reached it. Its wire
// format is checked by the openai-go client in Corral's tests.
package objectstest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Server is the fake upstream. The zero value is not usable; call New.
type Server struct {
	mu      sync.Mutex // protects everything below
	next    int
	objects map[string]*object
	calls   []string
}

type object struct {
	id, kind string
	seq      int
	fields   map[string]any
	content  []byte
}

// New returns an empty fake upstream account.
func New() *Server { return &Server{objects: map[string]*object{}} }

// Calls returns every request received, as "METHOD /path?query body"
// (the body when it is JSON).
func (s *Server) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// CallsMentioning returns the calls whose path, query or JSON body
// contains id.
func (s *Server) CallsMentioning(id string) []string {
	var out []string
	for _, c := range s.Calls() {
		if strings.Contains(c, id) {
			out = append(out, c)
		}
	}
	return out
}

// Has reports whether the upstream holds id.
func (s *Server) Has(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.objects[id]
	return ok
}

// Direct creates a file straight at the upstream, as a tool or a team
// outside Corral would; Corral never sees it created.
func (s *Server) Direct(filename string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newFileLocked(filename, "user_data", []byte("made elsewhere")).id
}

// DirectContent creates a file with content straight at the upstream; a
// test assigns it to a tenant to stand for a file uploaded through Corral
// without sending its bytes twice.
func (s *Server) DirectContent(filename, purpose string, content []byte) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.newFileLocked(filename, purpose, content).id
}

// Handles reports whether path (below /v1) is one the fake serves.
func Handles(path string) bool {
	for _, p := range []string{"/files", "/batches", "/responses"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}

func (s *Server) newIDLocked(prefix string) (string, int) {
	s.next++
	return fmt.Sprintf("%s%024x", prefix, s.next*7919), s.next
}

func (s *Server) newFileLocked(name, purpose string, content []byte) *object {
	id, seq := s.newIDLocked("file-")
	o := &object{id: id, kind: "file", seq: seq, content: content, fields: map[string]any{
		"id": id, "object": "file", "bytes": len(content), "created_at": 1700000000 + seq,
		"filename": name, "purpose": purpose, "status": "processed",
	}}
	s.objects[id] = o
	return o
}

// ServeHTTP implements http.Handler for paths under /v1.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	entry := r.Method + " " + r.URL.Path
	if r.URL.RawQuery != "" {
		entry += "?" + r.URL.RawQuery
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		b, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		r.Body = io.NopCloser(bytes.NewReader(b))
		entry += " " + string(b)
	}
	s.mu.Lock()
	s.calls = append(s.calls, entry)
	s.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/v1")
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case parts[0] == "files":
		s.files(w, r, parts[1:])
	case parts[0] == "batches":
		s.batches(w, r, parts[1:])
	case parts[0] == "responses":
		s.responses(w, r, parts[1:])
	default:
		notFound(w, "Unknown path "+r.URL.Path)
	}
}

func (s *Server) files(w http.ResponseWriter, r *http.Request, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		mr, err := r.MultipartReader()
		if err != nil {
			badRequest(w, "expected multipart/form-data: "+err.Error())
			return
		}
		var name, purpose string
		var content []byte
		for {
			p, err := mr.NextPart()
			if err == io.EOF {
				break
			}
			if err != nil {
				badRequest(w, err.Error())
				return
			}
			b, _ := io.ReadAll(p)
			switch p.FormName() {
			case "file":
				name, content = p.FileName(), b
			case "purpose":
				purpose = string(b)
			}
		}
		if name == "" || purpose == "" {
			badRequest(w, "file and purpose are required")
			return
		}
		s.mu.Lock()
		o := s.newFileLocked(name, purpose, content)
		f := o.fields
		s.mu.Unlock()
		writeJSON(w, f)
	case len(rest) == 0 && r.Method == http.MethodGet:
		s.list(w, r, "file", 10000)
	case len(rest) >= 1:
		o := s.get(rest[0], "file")
		if o == nil {
			notFound(w, "No such File object: "+rest[0])
			return
		}
		switch {
		case len(rest) == 2 && rest[1] == "content" && r.Method == http.MethodGet:
			w.Header().Set("Content-Type", "application/octet-stream")
			_, _ = w.Write(o.content)
		case len(rest) == 1 && r.Method == http.MethodGet:
			writeJSON(w, o.fields)
		case len(rest) == 1 && r.Method == http.MethodDelete:
			s.remove(o.id)
			writeJSON(w, map[string]any{"id": o.id, "object": "file", "deleted": true})
		default:
			notFound(w, "Unknown path")
		}
	default:
		notFound(w, "Unknown path")
	}
}

func (s *Server) batches(w http.ResponseWriter, r *http.Request, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var req struct {
			InputFileID      string `json:"input_file_id"`
			Endpoint         string `json:"endpoint"`
			CompletionWindow string `json:"completion_window"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			badRequest(w, err.Error())
			return
		}
		if s.get(req.InputFileID, "file") == nil {
			notFound(w, "No such File object: "+req.InputFileID)
			return
		}
		s.mu.Lock()
		out := s.newFileLocked("batch_output.jsonl", "batch_output", []byte(`{"id":"out"}`+"\n"))
		id, seq := s.newIDLocked("batch_")
		o := &object{id: id, kind: "batch", seq: seq, fields: map[string]any{
			"id": id, "object": "batch", "endpoint": req.Endpoint, "input_file_id": req.InputFileID,
			"completion_window": req.CompletionWindow, "status": "completed", "created_at": 1700000000 + seq,
			"output_file_id": out.id, "request_counts": map[string]int{"total": 1, "completed": 1, "failed": 0},
		}}
		s.objects[id] = o
		f := o.fields
		s.mu.Unlock()
		writeJSON(w, f)
	case len(rest) == 0 && r.Method == http.MethodGet:
		s.list(w, r, "batch", 20)
	case len(rest) >= 1:
		o := s.get(rest[0], "batch")
		if o == nil {
			notFound(w, "No such Batch object: "+rest[0])
			return
		}
		switch {
		case len(rest) == 1 && r.Method == http.MethodGet:
			writeJSON(w, s.fields(o))
		case len(rest) == 2 && rest[1] == "cancel" && r.Method == http.MethodPost:
			s.mu.Lock()
			o.fields["status"] = "cancelling"
			s.mu.Unlock()
			writeJSON(w, s.fields(o))
		default:
			notFound(w, "Unknown path")
		}
	default:
		notFound(w, "Unknown path")
	}
}

func (s *Server) responses(w http.ResponseWriter, r *http.Request, rest []string) {
	switch {
	case len(rest) == 0 && r.Method == http.MethodPost:
		var req struct {
			Model              string          `json:"model"`
			Input              json.RawMessage `json:"input"`
			Store              *bool           `json:"store"`
			Stream             bool            `json:"stream"`
			PreviousResponseID string          `json:"previous_response_id"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			badRequest(w, err.Error())
			return
		}
		if req.PreviousResponseID != "" && s.get(req.PreviousResponseID, "response") == nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = fmt.Fprintf(w, `{"error":{"message":"Previous response with id '%s' not found.","type":"invalid_request_error","param":"previous_response_id","code":"previous_response_not_found"}}`, req.PreviousResponseID)
			return
		}
		s.mu.Lock()
		id, seq := s.newIDLocked("resp_")
		msg, _ := s.newIDLocked("msg_")
		text := fmt.Sprintf("answer %d", seq)
		if req.PreviousResponseID != "" {
			text += " after " + req.PreviousResponseID
		}
		fields := responseFields(id, msg, req.Model, text, seq)
		if req.Store == nil || *req.Store {
			s.objects[id] = &object{id: id, kind: "response", seq: seq, fields: fields, content: req.Input}
		}
		s.mu.Unlock()
		if req.Stream {
			streamResponse(w, fields, text)
			return
		}
		writeJSON(w, fields)
	case len(rest) >= 1:
		o := s.get(rest[0], "response")
		if o == nil {
			notFound(w, "Response with id '"+rest[0]+"' not found.")
			return
		}
		switch {
		case len(rest) == 1 && r.Method == http.MethodGet:
			writeJSON(w, s.fields(o))
		case len(rest) == 1 && r.Method == http.MethodDelete:
			s.remove(o.id)
			writeJSON(w, map[string]any{"id": o.id, "object": "response", "deleted": true})
		case len(rest) == 2 && rest[1] == "cancel" && r.Method == http.MethodPost:
			writeJSON(w, s.fields(o))
		case len(rest) == 2 && rest[1] == "input_items" && r.Method == http.MethodGet:
			writeJSON(w, map[string]any{"object": "list", "data": []any{map[string]any{
				"id": "msg_in_" + o.id, "type": "message", "role": "user", "status": "completed",
				"content": []any{map[string]any{"type": "input_text", "text": string(o.content)}}}},
				"first_id": "msg_in_" + o.id, "last_id": "msg_in_" + o.id, "has_more": false})
		default:
			notFound(w, "Unknown path")
		}
	default:
		notFound(w, "Unknown path")
	}
}

func responseFields(id, msg, model, text string, seq int) map[string]any {
	return map[string]any{
		"id": id, "object": "response", "created_at": 1700000000 + seq, "status": "completed",
		"model": model, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []any{},
		"output": []any{map[string]any{
			"type": "message", "id": msg, "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}},
		}},
		"usage": map[string]any{"input_tokens": 5, "output_tokens": 2, "total_tokens": 7,
			"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}},
	}
}

// streamResponse writes a Responses event stream: typed events with
// sequence numbers, no [DONE].
func streamResponse(w http.ResponseWriter, fields map[string]any, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	seq := 0
	send := func(typ string, ev map[string]any) {
		ev["type"], ev["sequence_number"] = typ, seq
		seq++
		b, _ := json.Marshal(ev)
		_, _ = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if flusher != nil {
			flusher.Flush()
		}
	}
	pending := map[string]any{}
	for k, v := range fields {
		pending[k] = v
	}
	pending["status"], pending["output"] = "in_progress", []any{}
	item := fields["output"].([]any)[0].(map[string]any)
	send("response.created", map[string]any{"response": pending})
	send("response.output_item.added", map[string]any{"output_index": 0, "item": map[string]any{
		"type": "message", "id": item["id"], "status": "in_progress", "role": "assistant", "content": []any{}}})
	send("response.content_part.added", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
	send("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text})
	send("response.output_text.done", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0, "text": text})
	send("response.content_part.done", map[string]any{"item_id": item["id"], "output_index": 0, "content_index": 0,
		"part": map[string]any{"type": "output_text", "text": text, "annotations": []any{}}})
	send("response.output_item.done", map[string]any{"output_index": 0, "item": item})
	send("response.completed", map[string]any{"response": fields})
}

func (s *Server) get(id, kind string) *object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.objects[id]; ok && o.kind == kind {
		return o
	}
	return nil
}

func (s *Server) fields(o *object) map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]any, len(o.fields))
	for k, v := range o.fields {
		out[k] = v
	}
	return out
}

func (s *Server) remove(id string) {
	s.mu.Lock()
	delete(s.objects, id)
	s.mu.Unlock()
}

// list answers a cursor-paginated list of kind, oldest first.
func (s *Server) list(w http.ResponseWriter, r *http.Request, kind string, defLimit int) {
	limit := defLimit
	if l, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && l > 0 {
		limit = l
	}
	after := r.URL.Query().Get("after")
	s.mu.Lock()
	var all []*object
	for _, o := range s.objects {
		if o.kind == kind {
			all = append(all, o)
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool { return all[i].seq < all[j].seq })
	start := 0
	if after != "" {
		for i, o := range all {
			if o.id == after {
				start = i + 1
			}
		}
	}
	page := all[start:]
	more := len(page) > limit
	if more {
		page = page[:limit]
	}
	data := make([]any, 0, len(page))
	for _, o := range page {
		data = append(data, s.fields(o))
	}
	out := map[string]any{"object": "list", "data": data, "has_more": more}
	if len(page) > 0 {
		out["first_id"], out["last_id"] = page[0].id, page[len(page)-1].id
	}
	writeJSON(w, out)
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

func notFound(w http.ResponseWriter, msg string) { apiError(w, http.StatusNotFound, msg) }

func badRequest(w http.ResponseWriter, msg string) { apiError(w, http.StatusBadRequest, msg) }

func apiError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": nil, "code": nil}})
	_, _ = w.Write(b)
}
