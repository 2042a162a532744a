package telemetry

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

func TestLogHandlerStampsTheSpan(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(LogHandler(slog.NewJSONHandler(&buf, nil))).With("component", "test")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "traced")
	log.InfoContext(context.Background(), "untraced")

	dec := json.NewDecoder(&buf)
	var traced, untraced map[string]any
	if err := dec.Decode(&traced); err != nil {
		t.Fatal(err)
	}
	if err := dec.Decode(&untraced); err != nil {
		t.Fatal(err)
	}
	if traced["trace_id"] != "ab010000000000000000000000000000" || traced["span_id"] != "cd02000000000000" || traced["component"] != "test" {
		t.Errorf("traced line = %v", traced)
	}
	if _, ok := untraced["trace_id"]; ok {
		t.Errorf("untraced line = %v; want no trace_id", untraced)
	}
}

func TestOperation(t *testing.T) {
	tests := []struct{ give, want string }{
		{"/chat/completions", "chat"},
		{"/responses", "chat"},
		{"/messages", "chat"},
		{"/completions", "text_completion"},
		{"/embeddings", "embeddings"},
		{"/files", ""},
	}
	for _, tt := range tests {
		if got := Operation(tt.give); got != tt.want {
			t.Errorf("Operation(%q) = %q; want %q", tt.give, got, tt.want)
		}
	}
}
