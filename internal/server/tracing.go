package server

import (
	"context"
	"net/http"
	"strconv"

	"github.com/go-chi/chi/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/telemetry"
)

// noSpan is what span returns when tracing is off: ending it or setting
// attributes on it does nothing, and getting it allocates nothing.
var noSpan trace.Span = noop.Span{}

// serverKind is built once: an option boxed per request is an allocation.
var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// span starts a child of ctx's span named name, when tracing is on. Off,
// it returns ctx and noSpan without touching the tracer, so an untraced
// hit pays neither a context nor a span. Attributes are set by callers
// under span.IsRecording(), for the same reason.
func (s *Server) span(ctx context.Context, name string) (context.Context, trace.Span) {
	if !s.tracing {
		return ctx, noSpan
	}
	return s.tracer.Start(ctx, name)
}

// traceRequests continues the client's trace (traceparent, tracestate,
// baggage) and wraps the request in a server span named "{method}
// {route}" with the HTTP semantic conventions' attributes and Corral's
// own: the tenant, the cache status and the tokens saved, read after the
// handler from the access log's record and status in the request's edge
// state (requestID's, which runs before it). Spans started below (rate
// limit, cache lookup, flight, stream) are its children, and the access
// log line carries its trace_id and span_id. With tracing off it is not
// in the chain at all.
func (s *Server) traceRequests(next http.Handler) http.Handler {
	if !s.tracing {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := telemetry.Propagator.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		method := telemetry.Method(r.Method) // the client's own text, bounded
		ctx, span := s.tracer.Start(ctx, method, serverKind,
			trace.WithAttributes(telemetry.HTTPMethod.String(method), telemetry.URLPath.String(telemetry.Bound(r.URL.Path))))
		r = r.WithContext(ctx)
		defer func() { endRequestSpan(r, span) }()
		next.ServeHTTP(w, r)
	})
}

// endRequestSpan names the server span by its route and records the
// answer. Only a 5xx is an error of the server span (the conventions'
// rule: a 4xx is the client's).
func endRequestSpan(r *http.Request, span trace.Span) {
	defer span.End()
	e := edgeFrom(r.Context())
	if e == nil {
		return // not behind requestID: nothing was recorded
	}
	rec, status := &e.rec, e.sw.status
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, telemetry.HTTPStatusCode.Int(status))
	// chi's pattern; a model endpoint served directly (Server.ServeHTTP)
	// is its own route.
	route := telemetry.Bound(r.URL.Path)
	if rc := chi.RouteContext(r.Context()); rc != nil {
		route = rc.RoutePattern()
	}
	if route != "" {
		attrs = append(attrs, telemetry.HTTPRoute.String(route))
		span.SetName(telemetry.Method(r.Method) + " " + route)
	}
	if rec.tenant != "" {
		attrs = append(attrs, telemetry.Tenant.String(rec.tenant))
	}
	if rec.cache != "" {
		attrs = append(attrs, telemetry.Cache.String(rec.cache))
	}
	if rec.saved > 0 {
		attrs = append(attrs, telemetry.TokensSaved.Int(rec.saved))
	}
	if status >= 500 {
		attrs = append(attrs, telemetry.ErrorType.String(strconv.Itoa(status)))
		span.SetStatus(codes.Error, "")
	}
	span.SetAttributes(attrs...)
}

// lookup is the flights' cache lookup in a span of its own that names
// what it found (corral.cache: HIT, STALE, NEGATIVE, or MISS).
func (s *Server) lookup(ctx context.Context, req *coalesce.Request) (coalesce.Outcome, bool) {
	ctx, span := s.span(ctx, telemetry.SpanCacheLookup)
	out, ok := s.flights.Lookup(ctx, req)
	if span.IsRecording() {
		result := cacheMiss
		if ok {
			result = sourceName(out.Source)
		}
		span.SetAttributes(telemetry.Cache.String(result))
		span.End()
	}
	return out, ok
}

// streamSpan is one client's stream relay: its span, with an event when
// the first event reaches the client (the time to first token) and the
// count of events at its end.
type streamSpan struct {
	span   trace.Span
	events int
}

func (s *Server) startStream(ctx context.Context) *streamSpan {
	_, span := s.span(ctx, telemetry.SpanStream)
	if !span.IsRecording() {
		return nil
	}
	return &streamSpan{span: span}
}

// sent notes the events of batch written to the client (those skip
// does not hide); nil-safe (not traced).
func (st *streamSpan) sent(skip func([]byte) bool, batch [][]byte) {
	if st == nil {
		return
	}
	n := 0
	for _, ev := range batch {
		if skip == nil || !skip(ev) {
			n++
		}
	}
	if n > 0 && st.events == 0 {
		st.span.AddEvent(telemetry.EventFirstToken)
	}
	st.events += n
}

func (st *streamSpan) end() {
	if st == nil {
		return
	}
	st.span.SetAttributes(telemetry.StreamEvents.Int(st.events))
	st.span.End()
}
