package telemetry

import (
	"encoding/json"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
)

// SetUsage records on an upstream attempt's span what its whole answer
// said: the model that answered (the body's top-level "model", which
// every API Corral serves has) and the tokens it used. The body is read
// for that one field only and never recorded.
func SetUsage(span trace.Span, body []byte, input, output int, known bool) {
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 3)
	var m struct {
		Model string `json:"model"`
	}
	if json.Unmarshal(body, &m) == nil && m.Model != "" {
		attrs = append(attrs, GenAIResponseModel.String(Bound(m.Model)))
	}
	if known {
		attrs = append(attrs, GenAIInputTokens.Int(input), GenAIOutputTokens.Int(output))
	}
	span.SetAttributes(attrs...)
}
