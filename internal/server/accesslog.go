package server

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"time"
)

// statusWriter records what was written, for the access log and for
// recover, which must not write a second header.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// anthropic: the request is on Anthropic's paths (/v1/messages...):
	// Corral's errors take Anthropic's shape and its rate-limit headers
	// Anthropic's names.
	anthropic bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status = code
		w.wrote = code >= 200 // 1xx informational headers do not count
		if w.anthropic && w.wrote {
			anthropicRateHeaders(w.Header(), time.Now())
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
		if w.anthropic {
			anthropicRateHeaders(w.Header(), time.Now())
		}
	}
	n, err := w.ResponseWriter.Write(p)
	w.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach Flush and deadlines.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logRecord carries what handlers learn about a request to the access log.
// Only the request's own goroutine touches it.
type logRecord struct {
	tenant     string
	endpoint   string // the model endpoint, or "proxy"
	model      string
	cache      string
	upstreamMS float64
	prompt     int    // tokens this request spent upstream (a leader)
	completion int    //
	saved      int    // tokens a hit or a coalesced answer did not spend
	err        string // the cause behind a 5xx, never shown to the client
	bypass     string // why a request was never cached (a Responses background run, ...)
}

// recordFrom is the request's access-log record, kept in its edge state
// (requestid.go).
func recordFrom(ctx context.Context) *logRecord {
	if e := edgeFrom(ctx); e != nil {
		return &e.rec
	}
	return &logRecord{} // detached: writes go nowhere
}

// accessLog writes one structured line per request and hands the record
// to observe (metrics and usage). It logs ids, tenant, model, outcome and
// token counts, never keys or prompt text.
func accessLog(log *slog.Logger, observe func(*logRecord, int, time.Duration)) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			e := edgeFrom(r.Context())
			if e == nil { // not behind requestID
				e = &edge{}
				r = r.WithContext(context.WithValue(r.Context(), edgeKey{}, e))
			}
			rec := &e.rec
			sw := &e.sw
			*sw = statusWriter{ResponseWriter: w, status: http.StatusOK, anthropic: isAnthropicPath(r.URL.Path) || isAnthropicModels(r)}
			// Deferred, so a response cut on purpose (http.ErrAbortHandler)
			// is still logged and counted.
			defer func() { logRequest(log, observe, r, rec, sw, start) }()
			next.ServeHTTP(sw, r)
		})
	}
}

// logRequest observes a finished request and writes its access log line.
func logRequest(log *slog.Logger, observe func(*logRecord, int, time.Duration), r *http.Request, rec *logRecord, sw *statusWriter, start time.Time) {
	elapsed := time.Since(start)
	observe(rec, sw.status, elapsed)
	level := slog.LevelInfo
	if !strings.HasPrefix(r.URL.Path, "/v1/") && !strings.HasPrefix(r.URL.Path, "/admin/") {
		level = slog.LevelDebug // probes and scrapes
	}
	if !log.Enabled(r.Context(), level) {
		return
	}
	attrs := make([]slog.Attr, 0, 12)
	attrs = append(attrs,
		slog.String("request_id", requestIDFrom(r.Context())),
		slog.String("method", r.Method),
		slog.String("path", r.URL.Path),
		slog.Int("status", sw.status),
		slog.Float64("latency_ms", float64(elapsed.Microseconds())/1000),
		slog.Int64("bytes", sw.bytes),
	)
	if rec.tenant != "" {
		attrs = append(attrs, slog.String("tenant", rec.tenant))
	}
	if rec.endpoint != "" {
		attrs = append(attrs, slog.String("endpoint", rec.endpoint))
	}
	if rec.model != "" {
		attrs = append(attrs, slog.String("model", rec.model))
	}
	if rec.cache != "" {
		attrs = append(attrs, slog.String("cache", rec.cache))
	}
	if rec.upstreamMS > 0 {
		attrs = append(attrs, slog.Float64("upstream_ms", rec.upstreamMS))
	}
	if rec.prompt+rec.completion > 0 {
		attrs = append(attrs, slog.Int("prompt_tokens", rec.prompt), slog.Int("completion_tokens", rec.completion))
	}
	if rec.saved > 0 {
		attrs = append(attrs, slog.Int("saved_tokens", rec.saved))
	}
	if rec.bypass != "" {
		attrs = append(attrs, slog.String("bypass_reason", rec.bypass))
	}
	if rec.err != "" {
		attrs = append(attrs, slog.String("error", rec.err))
	}
	// Extra fields of the line (a trace id, ...) are appended to attrs
	// above. The record goes to the handler directly: Logger.LogAttrs
	// would also walk the stack (runtime.Callers) for a source location
	// the access log never shows, a tenth of the line's cost.
	line := slog.NewRecord(time.Now(), level, "request", 0)
	line.AddAttrs(attrs...)
	_ = log.Handler().Handle(r.Context(), line)
}
