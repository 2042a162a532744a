// Package telemetry is the vocabulary of Corral's traces: the span names,
// the attribute keys (OpenTelemetry's HTTP and GenAI semantic conventions
// plus Corral's own corral.*), the propagator that continues a client's
// trace and carries it upstream, and a log handler that stamps log lines
// with the trace they belong to.
//
// It depends on the OpenTelemetry API only, never the SDK: the packages
// that record spans (server, coalesce, failover, upstream) take a
// trace.Tracer and stay cheap when it is a no-op. Turning tracing on from
// the OTEL_* environment is internal/telemetry/otlp's job.
//
// Spans never carry a key (a tenant's or an upstream's) or the text of a
// prompt or an answer: they carry ids, names, statuses and token counts.
// Content capture is left out on purpose (see the README's Tracing
// section): a trace backend is usually readable by more people than the
// prompts are meant for.
package telemetry

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// ScopeName is the instrumentation scope of every Corral span.
const ScopeName = "github.com/corralhq/corral"

// Span names. The HTTP server span is named "{method} {route}" and an
// upstream attempt "{gen_ai.operation.name} {gen_ai.request.model}", as
// the semantic conventions ask; Corral's own steps are named here.
const (
	// SpanRateLimit is one requests/min or tokens/min decision.
	SpanRateLimit = "corral.ratelimit"
	// SpanCacheLookup is the read of a prompt's stored answer before it
	// joins a flight.
	SpanCacheLookup = "corral.cache.lookup"
	// SpanFlight is a request's part in its prompt's flight: the leader's
	// (parent of the lock wait and the upstream attempts) or a follower's
	// (linked to the leader's flight span).
	SpanFlight = "corral.flight"
	// SpanLockWait is a flight's wait for another instance's leader.
	SpanLockWait = "corral.lock.wait"
	// SpanStream is the relay of an event stream to one client.
	SpanStream = "corral.stream"
	// EventFirstToken marks, on a stream span, the first event written
	// to the client: the time to first token.
	EventFirstToken = "corral.first_token"
)

// Corral's attributes.
const (
	// Tenant is the tenant's id (never its key).
	Tenant = attribute.Key("corral.tenant")
	// Cache is the answer's X-Corral-Cache value: MISS, HIT, COALESCED,
	// STALE, NEGATIVE, BYPASS.
	Cache = attribute.Key("corral.cache")
	// TokensSaved is what a hit or a coalesced answer did not spend.
	TokensSaved = attribute.Key("corral.tokens_saved")
	// Upstream is the configured name of the upstream an attempt went to.
	Upstream = attribute.Key("corral.upstream")
	// UpstreamProvider is who runs that upstream, as the upstreams file
	// names it: openai, anthropic, azure, bedrock, vertex.
	UpstreamProvider = attribute.Key("corral.upstream.provider")
	// Attempt counts an upstream call's attempts from 1.
	Attempt = attribute.Key("corral.attempt")
	// Outcome is how an attempt ended: answer, retry, cooldown, error,
	// timeout, canceled.
	Outcome = attribute.Key("corral.outcome")
	// FlightRole is leader (this flight calls upstream) or follower
	// (another request's call answers it).
	FlightRole = attribute.Key("corral.flight.role")
	// TookOver marks a flight that took the lock over from a leader that
	// left without an answer.
	TookOver = attribute.Key("corral.flight.took_over")
	// LockResult is how a lock wait ended: answered (the leader's entry),
	// mirrored (its live stream), leader_failed (its transient failure),
	// took_over, timeout, canceled, degraded (Redis failed).
	LockResult = attribute.Key("corral.lock.result")
	// RateLimitKind is requests or tokens.
	RateLimitKind = attribute.Key("corral.ratelimit.kind")
	// RateLimitAllowed reports whether the limit let the request through.
	RateLimitAllowed = attribute.Key("corral.ratelimit.allowed")
	// RateLimitRemaining is what is left of the limit after the decision.
	RateLimitRemaining = attribute.Key("corral.ratelimit.remaining")
	// StreamEvents counts the events a stream relay wrote.
	StreamEvents = attribute.Key("corral.stream.events")
)

// OpenTelemetry semantic-convention attributes Corral sets (HTTP and
// GenAI; the GenAI ones are still "development" in the conventions, so
// gen_ai.system is set beside its successor gen_ai.provider.name for
// backends that know only the older name).
const (
	HTTPMethod     = attribute.Key("http.request.method")
	HTTPRoute      = attribute.Key("http.route")
	HTTPStatusCode = attribute.Key("http.response.status_code")
	URLPath        = attribute.Key("url.path")
	ErrorType      = attribute.Key("error.type")

	GenAIOperation     = attribute.Key("gen_ai.operation.name")
	GenAIProvider      = attribute.Key("gen_ai.provider.name")
	GenAISystem        = attribute.Key("gen_ai.system")
	GenAIRequestModel  = attribute.Key("gen_ai.request.model")
	GenAIResponseModel = attribute.Key("gen_ai.response.model")
	GenAIInputTokens   = attribute.Key("gen_ai.usage.input_tokens")
	GenAIOutputTokens  = attribute.Key("gen_ai.usage.output_tokens")
)

// GenAIProviderName is the gen_ai.provider.name value of the conventions
// for provider as the upstreams file names it: a model served through a
// cloud is named by the cloud (aws.bedrock, gcp.vertex_ai,
// azure.ai.openai), as the conventions' list does, not by the model's
// maker. An unknown provider is returned as it is.
func GenAIProviderName(provider string) string {
	switch provider {
	case "azure":
		return "azure.ai.openai"
	case "bedrock":
		return "aws.bedrock"
	case "vertex":
		return "gcp.vertex_ai"
	}
	return provider
}

// Propagator reads and writes the W3C traceparent, tracestate and
// baggage headers: a client's trace is continued, and every upstream call
// carries the trace on so a self-hosted model server's spans join it.
var Propagator propagation.TextMapPropagator = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})

// Tracer is Corral's tracer from tp; nil gives a no-op tracer.
func Tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		return noop.NewTracerProvider().Tracer(ScopeName)
	}
	return tp.Tracer(ScopeName)
}

// Operation is gen_ai.operation.name for an API path below /v1: chat for
// chat completions, the Responses API and Anthropic's Messages,
// text_completion, embeddings; "" for a path that is no model call.
func Operation(path string) string {
	switch path {
	case "/chat/completions", "/responses", "/messages":
		return "chat"
	case "/completions":
		return "text_completion"
	case "/embeddings":
		return "embeddings"
	}
	return ""
}
