package server

import (
	"context"
	"log/slog"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/spend"
)

// statusWriter records what was written, for the access log and for
// recover, which must not write a second header.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
	wrote  bool
	// code is the error code of the answer when Corral wrote it itself
	// (writeError): the access line names every refusal's.
	code string
	// anthropic: the request is for Anthropic's API (apiOfRequest):
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
	scope      string // the tenant's Scope: what its usage is counted under
	endpoint   string // the model endpoint, or "proxy"
	model      string
	cache      string
	upstreamMS float64
	prompt     int               // tokens this request spent upstream (a leader)
	completion int               //
	saved      int               // tokens a hit or a coalesced answer did not spend
	cost       spend.Nanodollars // what this request's upstream call cost (a leader, a BYPASS)
	savedUSD   spend.Nanodollars // what a HIT, STALE or COALESCED answer saved
	priceLabel string            // the catalog's name of the model priced; "" when none was
	usageRow   string            // the model of the usage row it counts in (usageModel); "" for other
	err        string            // the cause behind a 5xx, never shown to the client
	bypass     string            // why a request was never cached (a Responses background run, ...)
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
// token counts, never keys or prompt text. With enc (the gateway's
// logger's own encoder, accessline.New) the line skips slog's handler.
func accessLog(log *slog.Logger, enc *accessline.Encoder, observe func(*logRecord, int, time.Duration)) func(http.Handler) http.Handler {
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
			*sw = statusWriter{ResponseWriter: w, status: http.StatusOK, anthropic: apiOfRequest(r) == apiAnthropic}
			// Deferred, so a response cut on purpose (http.ErrAbortHandler)
			// is still logged and counted.
			defer func() { logRequest(log, enc, observe, r, rec, sw, start) }()
			next.ServeHTTP(sw, r)
		})
	}
}

// isProbe reports a load balancer's probe or a scraper's request (GET or
// HEAD of /healthz, /readyz or /metrics): the one kind of request logged
// at debug, since one arrives every few seconds per instance and would
// drown the rest. Every other request, on any path, is logged at info.
func isProbe(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		return false
	}
	switch r.URL.Path {
	case "/healthz", "/readyz", "/metrics":
		return true
	}
	return false
}

// logRequest observes a finished request and writes its access log line:
// through enc when the server has the gateway's encoder, else through
// log's handler. Both write the same bytes (internal/accessline's tests).
func logRequest(log *slog.Logger, enc *accessline.Encoder, observe func(*logRecord, int, time.Duration), r *http.Request, rec *logRecord, sw *statusWriter, start time.Time) {
	elapsed := time.Since(start)
	observe(rec, sw.status, elapsed)
	level := slog.LevelInfo
	if isProbe(r) {
		level = slog.LevelDebug
	}
	if !log.Enabled(r.Context(), level) {
		return
	}
	// Extra fields of the line (a trace id, ...) belong in accessline.Line
	// and both of its encodings. The record goes to the handler directly:
	// Logger.LogAttrs would also walk the stack (runtime.Callers) for a
	// source location the access log never shows.
	line := accessline.Line{
		RequestID:  requestIDFrom(r.Context()),
		Method:     r.Method,
		Path:       r.URL.Path,
		Status:     sw.status,
		LatencyMS:  float64(elapsed.Microseconds()) / 1000,
		Bytes:      sw.bytes,
		Tenant:     rec.tenant,
		Endpoint:   rec.endpoint,
		Model:      rec.model,
		Cache:      rec.cache,
		UpstreamMS: rec.upstreamMS,
		Prompt:     rec.prompt,
		Completion: rec.completion,
		Saved:      rec.saved,
		CostUSD:    rec.cost,
		SavedUSD:   rec.savedUSD,
		Bypass:     rec.bypass,
		Code:       sw.code,
		Err:        rec.err,
	}
	if enc != nil {
		_ = enc.Write(r.Context(), time.Now(), level, &line)
		return
	}
	_ = log.Handler().Handle(r.Context(), line.Record(time.Now(), level))
}
