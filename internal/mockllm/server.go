package mockllm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
)

// Options configures a Server. The zero value is ready to use.
type Options struct {
	// Latency is waited before the first byte of every POST answer
	// (success or error). Default 0.
	Latency time.Duration

	// StreamChunks is the number of content chunks in a streamed reply
	// (fewer when the reply has fewer runes). Default 5.
	StreamChunks int

	// ChunkDelay is waited before each content chunk of a stream. Default 0.
	ChunkDelay time.Duration

	// SlowLatency is the latency of the mock-slow model. Default 5s.
	SlowLatency time.Duration

	// Models is the list served by GET /v1/models. It does not restrict the
	// models the mock answers for. Default DefaultModels.
	Models []string

	// OnRequest, when set, is called at the start of every API request
	// (not for the /mock/ control endpoints), after the request has been
	// counted as in flight and before its body is read. It runs on the
	// request's goroutine, so a test may block in it to hold the answer
	// back; it must not read r.Body.
	OnRequest func(r *http.Request)
}

// DefaultModels is the model list served when Options.Models is empty.
var DefaultModels = []string{
	"gpt-4o-mini", "gpt-4o", "gpt-3.5-turbo-instruct", "text-embedding-3-small",
	"claude-sonnet-5-5", "claude-opus-5-5", "claude-haiku-5-5",
	"claude-sonnet-4-5", "claude-opus-4-5", "claude-haiku-4-5",
	"mock-tool", "mock-slow", "mock-hang", "mock-stall", "mock-cut",
	"mock-400", "mock-401", "mock-403", "mock-404", "mock-408", "mock-409",
	"mock-422", "mock-429", "mock-500", "mock-502", "mock-503",
}

const (
	defaultStreamChunks = 5
	defaultSlowLatency  = 5 * time.Second

	// created is the fixed "created" timestamp of every object
	// (2025-01-01T00:00:00Z): a clock would make answers non-deterministic.
	created = 1735689600

	fingerprint = "fp_mock"

	maxBodyBytes  = 32 << 20
	maxChoices    = 128
	maxChunks     = 1 << 16
	maxDimensions = 1 << 16
	maxDelayMS    = 24 * 60 * 60 * 1000
)

// Server is the mock model. It implements http.Handler and is safe for
// concurrent use.
type Server struct {
	opts       Options
	modelsJSON []byte
	models     map[string][]byte // id → model object JSON
	stats      counters
}

var _ http.Handler = (*Server)(nil)

// New returns a Server. It panics if a duration or count in opts is
// negative, which is a programming error.
func New(opts Options) *Server {
	if opts.Latency < 0 || opts.StreamChunks < 0 || opts.ChunkDelay < 0 || opts.SlowLatency < 0 {
		panic("mockllm: negative value in Options")
	}
	if opts.StreamChunks == 0 {
		opts.StreamChunks = defaultStreamChunks
	}
	if opts.SlowLatency == 0 {
		opts.SlowLatency = defaultSlowLatency
	}
	if len(opts.Models) == 0 {
		opts.Models = DefaultModels
	}
	opts.Models = append([]string(nil), opts.Models...)

	s := &Server{opts: opts, models: make(map[string][]byte, len(opts.Models))}
	list := modelList{Object: "list", Data: make([]model, len(opts.Models))}
	for i, id := range opts.Models {
		list.Data[i] = model{ID: id, Object: "model", Created: created, OwnedBy: "corral-mock"}
		s.models[id] = mustMarshal(list.Data[i])
	}
	s.modelsJSON = mustMarshal(list)
	s.stats.init()
	return s
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/mock/stats":
		s.serveStats(w, r)
		return
	case "/mock/reset":
		s.serveReset(w, r)
		return
	}

	p := pathOf(r.URL.Path)
	s.stats.begin(p)
	gone := false
	// Runs on the panic of a cut too, with gone false: a cut is counted
	// where it is made and is not a cancellation.
	defer func() { s.stats.end(gone) }()
	if s.opts.OnRequest != nil {
		s.opts.OnRequest(r)
	}

	switch p {
	case pathChat, pathCompletions, pathEmbeddings, pathResponses:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.writeError(w, http.StatusMethodNotAllowed, kindBadMethod, msgBadMethod, "")
			return
		}
		gone = s.serveAPI(w, r, p)
	case pathMessages:
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", http.MethodPost)
			s.writeAnthropicError(w, http.StatusMethodNotAllowed, msgBadMethod)
			return
		}
		_, countOnly := isMessagesPath(r.URL.Path)
		gone = s.serveMessages(w, r, countOnly)
	case pathModels:
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			s.writeError(w, http.StatusMethodNotAllowed, kindBadMethod, msgBadMethod, "")
			return
		}
		s.serveModels(w, r)
	default:
		s.writeError(w, http.StatusNotFound, kindNotFound, unknownURL(r), "")
	}
}

// request holds the fields of all three POST endpoints the mock reads.
// Everything else in the body is ignored.
type request struct {
	Model          string          `json:"model"`
	Messages       []message       `json:"messages"`
	Prompt         json.RawMessage `json:"prompt"`
	Input          json.RawMessage `json:"input"`
	Tools          json.RawMessage `json:"tools"`
	ResponseFormat json.RawMessage `json:"response_format"`
	Stream         bool            `json:"stream"`
	StreamOptions  *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N              int       `json:"n"`
	Dimensions     int       `json:"dimensions"`
	EncodingFormat string    `json:"encoding_format"`
	Mock           overrides `json:"mock"`
}

// streamSpec is what a streamed answer to req is made of.
func (req *request) streamSpec(id string, replies []string, u usage) *streamSpec {
	return &streamSpec{
		id:           id,
		model:        req.Model,
		replies:      replies,
		includeUsage: req.StreamOptions != nil && req.StreamOptions.IncludeUsage,
		usage:        u,
	}
}

type message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// overrides is the "mock" body field; see the package doc. Pointers tell
// "absent" from zero.
type overrides struct {
	LatencyMS    *int64  `json:"latency_ms"`
	Chunks       *int    `json:"chunks"`
	ChunkDelayMS *int64  `json:"chunk_delay_ms"`
	Status       *int    `json:"status"`
	CutAfter     *int    `json:"cut_after"`
	Reply        *string `json:"reply"`
}

// plan is what one request will get, after Options, the model name and the
// overrides have been combined.
type plan struct {
	latency    time.Duration
	chunks     int
	chunkDelay time.Duration
	status     int // 0 = success
	cutAfter   int // content chunks before a cut; -1 = no cut
	hang       bool
	stall      bool // send the answer's headers, then nothing
}

var bodyPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// serveAPI serves the POST endpoints. It reports whether the client went
// away before the answer was complete.
func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, p path) (gone bool) {
	buf := bodyPool.Get().(*bytes.Buffer)
	defer func() {
		if buf.Cap() <= 1<<20 {
			buf.Reset()
			bodyPool.Put(buf)
		}
	}()
	buf.Reset()
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, maxBodyBytes)); err != nil {
		if errors.As(err, new(*http.MaxBytesError)) {
			s.writeError(w, http.StatusRequestEntityTooLarge, kindTooLarge, msgTooLarge, "")
			return false
		}
		if r.Context().Err() != nil {
			return true
		}
		s.writeBadRequest(w, "Could not read the request body.", "")
		return false
	}
	body := buf.Bytes()

	var req request
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeBadRequest(w, "We could not parse the JSON body of your request. ("+err.Error()+")", "")
		return false
	}
	if req.Model == "" {
		s.writeBadRequest(w, msgMissingModel, "model")
		return false
	}
	s.stats.model(req.Model)

	pl, err := s.plan(&req)
	if err != nil {
		s.writeRequestError(w, err)
		return false
	}

	if pl.hold(w, r, req.Stream) {
		return true
	}
	if pl.status != 0 {
		s.writeStatus(w, pl.status, req.Model)
		return false
	}

	id := bodyHash(body)
	switch p {
	case pathChat:
		return s.serveChat(w, r, &req, &pl, id)
	case pathCompletions:
		return s.serveCompletion(w, r, &req, &pl, id)
	case pathResponses:
		return s.serveResponses(w, r, body, &req, &pl, id)
	default:
		return s.serveEmbedding(w, r, &req, &pl)
	}
}

// stall answers 200 with the headers of an answer (an event stream's when
// the client asked for one), flushes them, and sends nothing more until the
// client goes away: an upstream that hangs after its headers.
func stall(w http.ResponseWriter, r *http.Request, stream bool) {
	if stream {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-cache")
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(http.StatusOK)
	_ = http.NewResponseController(w).Flush()
	<-r.Context().Done()
}

// plan combines Options, the model's behaviour and the overrides. Its
// errors are *requestError.
func (s *Server) plan(req *request) (plan, error) {
	pl := plan{
		latency:    s.opts.Latency,
		chunks:     s.opts.StreamChunks,
		chunkDelay: s.opts.ChunkDelay,
		cutAfter:   -1,
	}
	switch req.Model {
	case "mock-slow":
		pl.latency = s.opts.SlowLatency
	case "mock-hang":
		pl.hang = true
	case "mock-stall":
		pl.stall = true
	case "mock-cut":
		// Set below, once the chunk count is known.
	default:
		if st, ok := strings.CutPrefix(req.Model, "mock-"); ok {
			if n := atoi(st); injectable(n) {
				pl.status = n
			}
		}
	}

	o := &req.Mock
	if o.LatencyMS != nil {
		if *o.LatencyMS < 0 || *o.LatencyMS > maxDelayMS {
			return pl, badRequest("mock.latency_ms", "mock.latency_ms must be between 0 and 86400000 (a day).")
		}
		pl.latency = time.Duration(*o.LatencyMS) * time.Millisecond
	}
	if o.Chunks != nil {
		if *o.Chunks < 1 || *o.Chunks > maxChunks {
			return pl, badRequest("mock.chunks", fmt.Sprintf("mock.chunks must be between 1 and %d.", maxChunks))
		}
		pl.chunks = *o.Chunks
	}
	if o.ChunkDelayMS != nil {
		if *o.ChunkDelayMS < 0 || *o.ChunkDelayMS > maxDelayMS {
			return pl, badRequest("mock.chunk_delay_ms", "mock.chunk_delay_ms must be between 0 and 86400000 (a day).")
		}
		pl.chunkDelay = time.Duration(*o.ChunkDelayMS) * time.Millisecond
	}
	if o.Status != nil {
		if *o.Status < 400 || *o.Status > 599 {
			return pl, badRequest("mock.status", "mock.status must be between 400 and 599.")
		}
		pl.status = *o.Status
	}
	if o.CutAfter != nil {
		if *o.CutAfter < 0 {
			return pl, badRequest("mock.cut_after", "mock.cut_after must not be negative.")
		}
		pl.cutAfter = *o.CutAfter
	} else if req.Model == "mock-cut" {
		pl.cutAfter = pl.chunks / 2
	}
	if req.N < 0 || req.N > maxChoices {
		return pl, badRequest("n", fmt.Sprintf("n must be between 1 and %d.", maxChoices))
	}
	if req.N == 0 {
		req.N = 1
	}
	return pl, nil
}

// bodyHash is the hex id of a request: a hash of its top-level members in
// key order, without stream and stream_options, so that the streamed and
// the plain answer to one prompt carry the same id, as they carry the same
// content and usage.
func bodyHash(body []byte) string {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(body, &m); err != nil {
		sum := sha256.Sum256(body) // unreachable: body has been decoded once
		return hex.EncodeToString(sum[:12])
	}
	delete(m, "stream")
	delete(m, "stream_options")
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(m)) {
		h.Write([]byte(k))
		h.Write([]byte{0})
		h.Write(m[k])
		h.Write([]byte{0})
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:12])
}

// atoi parses a small non-negative decimal, or returns -1.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// hold keeps the answer back as pl says before anything is written: a
// stalling model sends its headers and then nothing until the client
// leaves, a hanging one sends nothing until then, any other waits
// pl.latency. It reports whether the request is over (stalled, or the
// client went away meanwhile), so the caller writes nothing more.
func (pl *plan) hold(w http.ResponseWriter, r *http.Request, stream bool) (over bool) {
	if pl.stall {
		stall(w, r, stream)
		return true
	}
	if pl.hang {
		<-r.Context().Done()
		return true
	}
	return !sleep(r.Context(), pl.latency)
}

// sleep waits for d or until ctx ends, and reports whether ctx is still
// alive. A timer, not time.Sleep, so a client that goes away frees the
// handler at once.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// writeJSON writes a complete 200 JSON answer, or, when cut, half of it
// followed by an aborted connection.
func (s *Server) writeJSON(w http.ResponseWriter, b []byte, cut bool) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if cut {
		_, _ = w.Write(b[:len(b)/2])
		s.cut(w)
	}
	_, _ = w.Write(b)
}

// cut flushes what was written and aborts the response, so the client sees
// a truncated body or stream rather than a clean end.
func (s *Server) cut(w http.ResponseWriter) {
	_ = http.NewResponseController(w).Flush()
	s.stats.cuts.Add(1)
	s.stats.changed()
	panic(http.ErrAbortHandler)
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic("mockllm: " + err.Error())
	}
	return b
}

// wordCount counts whitespace-separated words without allocating.
func wordCount(s string) int {
	n, in := 0, false
	for _, r := range s {
		space := unicode.IsSpace(r)
		if !space && !in {
			n++
		}
		in = !space
	}
	return n
}
