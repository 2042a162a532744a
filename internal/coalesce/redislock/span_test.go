package redislock

import (
	"context"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestTokenCarriesTheSampledSpan(t *testing.T) {
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5}, TraceFlags: trace.FlagsSampled})
	tok := newToken(trace.ContextWithSpanContext(context.Background(), sc))
	got := SpanOf(tok)
	if got.TraceID() != sc.TraceID() || got.SpanID() != sc.SpanID() || !got.IsSampled() || !got.IsRemote() {
		t.Errorf("SpanOf(%q) = %v; want %v, remote", tok, got, sc)
	}
	if a, b := newToken(context.Background()), newToken(context.Background()); a == b || strings.Contains(a, spanSep) {
		t.Errorf("untraced tokens %q %q: want distinct, with no span", a, b)
	}
	unsampled := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}})
	if tok := newToken(trace.ContextWithSpanContext(context.Background(), unsampled)); strings.Contains(tok, spanSep) {
		t.Errorf("an unsampled span is carried: %q", tok)
	}
	for _, bad := range []string{"", "dead-instance", "X;01-abc", "X;00-zz-yy-01", "X;00-" + strings.Repeat("0", 32) + "-" + strings.Repeat("0", 16) + "-01"} {
		if SpanOf(bad).IsValid() {
			t.Errorf("SpanOf(%q) is valid", bad)
		}
	}
}
