package mockllm

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/corralhq/corral/internal/jsonstr"
)

// streamSpec is one streamed answer. Chunks are built by appending to a
// reused buffer around a prefix computed once, so a chunk costs no
// allocation: benchmarks measure the gateway against this stream.
type streamSpec struct {
	chat         bool     // chat.completion.chunk (else text_completion)
	id           string   // full id, e.g. "chatcmpl-…"
	model        string   // echoed
	replies      []string // content of each choice, by index
	includeUsage bool
	usage        usage
}

// stream writes spec as server-sent events, pacing and cutting it per pl.
// It reports whether the client went away before the stream was complete.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, spec *streamSpec, pl *plan) (gone bool) {
	ctx, ew := s.startStream(w, r)
	defer ew.stop()

	// Every chunk is prefix + choices + suffix.
	object := "text_completion"
	if spec.chat {
		object = "chat.completion.chunk"
	}
	prefix := make([]byte, 0, 160+len(spec.model))
	prefix = append(prefix, `data: {"id":`...)
	prefix = jsonstr.Append(prefix, spec.id)
	prefix = append(prefix, `,"object":"`...)
	prefix = append(prefix, object...)
	prefix = append(prefix, `","created":`...)
	prefix = strconv.AppendInt(prefix, created, 10)
	prefix = append(prefix, `,"model":`...)
	prefix = jsonstr.Append(prefix, spec.model)
	prefix = append(prefix, `,"system_fingerprint":"`+fingerprint+`","choices":[`...)
	suffix := "]}\n\n"
	if spec.includeUsage {
		suffix = "],\"usage\":null}\n\n"
	}

	pieces := make([][]string, len(spec.replies))
	steps := 0
	for i, reply := range spec.replies {
		pieces[i] = split(reply, pl.chunks)
		steps = max(steps, len(pieces[i]))
	}

	if spec.chat {
		for i := range spec.replies {
			ew.buf = append(ew.buf[:0], prefix...)
			ew.buf = append(ew.buf, `{"index":`...)
			ew.buf = strconv.AppendInt(ew.buf, int64(i), 10)
			ew.buf = append(ew.buf, `,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}`...)
			ew.buf = append(ew.buf, suffix...)
			if !ew.send(ctx) {
				return true
			}
		}
	}

	if s.pace(ctx, w, ew, pl, steps, func(k int) bool {
		for i := range spec.replies {
			if k >= len(pieces[i]) {
				continue
			}
			ew.buf = append(ew.buf[:0], prefix...)
			if spec.chat {
				ew.buf = append(ew.buf, `{"index":`...)
				ew.buf = strconv.AppendInt(ew.buf, int64(i), 10)
				ew.buf = append(ew.buf, `,"delta":{"content":`...)
				ew.buf = jsonstr.Append(ew.buf, pieces[i][k])
				ew.buf = append(ew.buf, `},"logprobs":null,"finish_reason":null}`...)
			} else {
				ew.buf = append(ew.buf, `{"text":`...)
				ew.buf = jsonstr.Append(ew.buf, pieces[i][k])
				ew.buf = append(ew.buf, `,"index":`...)
				ew.buf = strconv.AppendInt(ew.buf, int64(i), 10)
				ew.buf = append(ew.buf, `,"logprobs":null,"finish_reason":null}`...)
			}
			ew.buf = append(ew.buf, suffix...)
			if !ew.send(ctx) {
				return false
			}
		}
		return true
	}) {
		return true
	}

	for i := range spec.replies {
		ew.buf = append(ew.buf[:0], prefix...)
		if spec.chat {
			ew.buf = append(ew.buf, `{"index":`...)
			ew.buf = strconv.AppendInt(ew.buf, int64(i), 10)
			ew.buf = append(ew.buf, `,"delta":{},"logprobs":null,"finish_reason":"stop"}`...)
		} else {
			ew.buf = append(ew.buf, `{"text":"","index":`...)
			ew.buf = strconv.AppendInt(ew.buf, int64(i), 10)
			ew.buf = append(ew.buf, `,"logprobs":null,"finish_reason":"stop"}`...)
		}
		ew.buf = append(ew.buf, suffix...)
		if !ew.send(ctx) {
			return true
		}
	}
	if spec.includeUsage {
		ew.buf = append(ew.buf[:0], prefix...)
		ew.buf = append(ew.buf, `],"usage":`...)
		ew.buf = spec.usage.appendJSON(ew.buf)
		ew.buf = append(ew.buf, "}\n\n"...)
		if !ew.send(ctx) {
			return true
		}
	}
	ew.buf = append(ew.buf[:0], "data: [DONE]\n\n"...)
	return !ew.send(ctx)
}

// startStream counts a stream and sends its headers; the caller stops the
// returned writer.
// pace writes the steps of a stream's content through send: a pause of
// pl.chunkDelay before each, and the connection cut where pl.cutAfter
// says (before that step, or after the last one when cutAfter >= steps).
// send reports whether its write went out. pace reports whether the client
// went away. Every API's stream paces and cuts its content the same way.
func (s *Server) pace(ctx context.Context, w http.ResponseWriter, ew *eventWriter, pl *plan, steps int, send func(k int) bool) (gone bool) {
	for k := range steps {
		if k == pl.cutAfter {
			s.cut(w)
		}
		if !ew.pause(ctx, pl.chunkDelay) || !send(k) {
			return true
		}
	}
	if pl.cutAfter >= steps {
		s.cut(w)
	}
	return false
}

func (s *Server) startStream(w http.ResponseWriter, r *http.Request) (context.Context, *eventWriter) {
	s.stats.streams.Add(1)
	s.stats.changed()
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return r.Context(), &eventWriter{w: w, rc: http.NewResponseController(w), buf: make([]byte, 0, 512)}
}

// typed sends one typed event, "event: <typ>" and its data with "type"
// set to typ, as the Responses and Messages APIs do.
func (ew *eventWriter) typed(ctx context.Context, typ string, ev map[string]any) bool {
	ev["type"] = typ
	ew.buf = append(ew.buf[:0], "event: "...)
	ew.buf = append(ew.buf, typ...)
	ew.buf = append(ew.buf, "\ndata: "...)
	ew.buf = append(ew.buf, mustMarshal(ev)...)
	ew.buf = append(ew.buf, "\n\n"...)
	return ew.send(ctx)
}

// eventWriter writes and flushes events and paces them.
type eventWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	buf   []byte
	timer *time.Timer // reused by pause; nil until the first delay
}

// send writes buf as one event and flushes it. It reports false when the
// client is gone.
func (ew *eventWriter) send(ctx context.Context) bool {
	if ctx.Err() != nil {
		return false
	}
	if _, err := ew.w.Write(ew.buf); err != nil {
		return false
	}
	if err := ew.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return false
	}
	return true
}

// pause waits d, or until ctx ends, and reports whether ctx is alive.
func (ew *eventWriter) pause(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	if ew.timer == nil {
		ew.timer = time.NewTimer(d)
	} else {
		ew.timer.Reset(d) // since Go 1.23 Reset needs no drain
	}
	select {
	case <-ctx.Done():
		return false
	case <-ew.timer.C:
		return true
	}
}

func (ew *eventWriter) stop() {
	if ew.timer != nil {
		ew.timer.Stop()
	}
}

// split cuts s into n pieces of about equal rune counts (fewer when s has
// fewer than n runes, one when s is empty), without allocating strings.
// The pieces concatenate to s.
func split(s string, n int) []string {
	runes := utf8.RuneCountInString(s)
	n = max(min(n, runes), 1)
	out := make([]string, 0, n)
	start, end, seen := 0, 0, 0
	for i := 1; i <= n; i++ {
		for target := i * runes / n; seen < target; seen++ {
			_, size := utf8.DecodeRuneInString(s[end:])
			end += size
		}
		if i == n {
			end = len(s) // keep any invalid trailing bytes
		}
		out = append(out, s[start:end])
		start = end
	}
	return out
}

// usage is OpenAI's usage object.
type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

func newUsage(prompt, completion int) usage {
	prompt = max(prompt, 1)
	return usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
}

func (u usage) appendJSON(dst []byte) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.TotalTokens), 10)
	return append(dst, '}')
}
