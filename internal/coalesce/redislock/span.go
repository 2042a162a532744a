package redislock

import (
	"context"
	"crypto/rand"
	"strings"

	"go.opentelemetry.io/otel/trace"
)

// spanSep separates a lock token's random part from the span it carries.
// The random part is base32 (rand.Text), which has no ';'.
const spanSep = ";"

// newToken is a lock's value: 128 random bits and, when ctx carries a
// sampled span, that span's W3C traceparent after spanSep
// ("<random>;00-<trace id>-<span id>-01"). A waiter on another instance
// reads it with [SpanOf] to link its span to its leader's. Release and
// renewal compare the whole value, and older instances only ever compare
// values, so the suffix changes nothing for them.
func newToken(ctx context.Context) string {
	t := rand.Text()
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return t
	}
	return t + spanSep + "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// SpanOf is the span a lock token carries (see newToken), marked remote;
// an invalid SpanContext when it carries none or is not one of ours.
func SpanOf(token string) trace.SpanContext {
	_, tp, ok := strings.Cut(token, spanSep)
	if !ok {
		return trace.SpanContext{}
	}
	parts := strings.Split(tp, "-")
	if len(parts) != 4 || parts[0] != "00" {
		return trace.SpanContext{}
	}
	tid, err := trace.TraceIDFromHex(parts[1])
	if err != nil {
		return trace.SpanContext{}
	}
	sid, err := trace.SpanIDFromHex(parts[2])
	if err != nil {
		return trace.SpanContext{}
	}
	flags := trace.TraceFlags(0)
	if parts[3] == "01" {
		flags = trace.FlagsSampled
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true})
}
