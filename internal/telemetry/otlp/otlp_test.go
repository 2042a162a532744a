package otlp

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

func envOf(kv ...string) func(string) (string, bool) {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestOffUnlessAnEndpointIsSet(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want bool
	}{
		{"nothing set", nil, false},
		{"service name only", []string{"OTEL_SERVICE_NAME", "corral"}, false},
		{"endpoint", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318"}, true},
		{"traces endpoint", []string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://127.0.0.1:4318/v1/traces"}, true},
		{"grpc", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}, true},
		{"sdk disabled", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_SDK_DISABLED", "true"}, false},
		{"exporter none", []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318", "OTEL_TRACES_EXPORTER", "none"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(context.Background(), Options{Getenv: envOf(tt.give...)})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Shutdown(context.Background())
			if p.Enabled() != tt.want || (p.TracerProvider() != nil) != tt.want {
				t.Errorf("enabled = %v, provider %v; want %v", p.Enabled(), p.TracerProvider(), tt.want)
			}
		})
	}
}

func TestRefusesWhatItCannotUse(t *testing.T) {
	tests := []struct {
		give []string
		want string
	}{
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "127.0.0.1:4318"}, "want an http:// or https:// URL"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"}, `protocol "http/json"`},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_TRACES_SAMPLER", "sometimes"}, `OTEL_TRACES_SAMPLER="sometimes"`},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_TRACES_SAMPLER", "traceidratio", "OTEL_TRACES_SAMPLER_ARG", "2"}, "want a ratio from 0 to 1"},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://x:4318", "OTEL_RESOURCE_ATTRIBUTES", "novalue"}, `"novalue" is not key=value`},
		{[]string{"OTEL_TRACES_EXPORTER", "zipkin"}, "OTLP only"},
		// The refused endpoint is named without its credentials.
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "grpc://user:s3cret@x:4317?token=t0ken"}, `"grpc://redacted@x:4317?redacted": want an http://`},
		{[]string{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://user:s3cret@x:port"}, `"(unparseable URL)": want an http://`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			_, err := New(context.Background(), Options{Getenv: envOf(tt.give...)})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v; want one saying %q", err, tt.want)
			}
		})
	}
}

// TestSamplerAndResource: the sampler follows OTEL_TRACES_SAMPLER (the
// default continues a client's decision), and every span carries
// service.name.
func TestSamplerAndResource(t *testing.T) {
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{1}, Remote: true}))
	tests := []struct {
		sampler            string
		root, unsampledKid bool
	}{
		{"", true, false},
		{"parentbased_always_on", true, false},
		{"always_on", true, true},
		{"always_off", false, false},
		{"parentbased_always_off", false, false},
		{"traceidratio", true, true}, // no argument: a ratio of 1
	}
	for _, tt := range tests {
		t.Run(tt.sampler, func(t *testing.T) {
			exp := &keptSpans{InMemoryExporter: tracetest.NewInMemoryExporter()}
			p, err := New(context.Background(), Options{Exporter: exp, Version: "v9.9.9",
				Getenv: envOf("OTEL_TRACES_SAMPLER", tt.sampler, "OTEL_SERVICE_NAME", "corral-a")})
			if err != nil {
				t.Fatal(err)
			}
			tr := p.TracerProvider().Tracer("test")
			_, root := tr.Start(context.Background(), "root")
			_, kid := tr.Start(unsampled, "kid")
			if root.IsRecording() != tt.root || kid.IsRecording() != tt.unsampledKid {
				t.Errorf("recording: root %v, kid of an unsampled parent %v; want %v %v", root.IsRecording(), kid.IsRecording(), tt.root, tt.unsampledKid)
			}
			root.End()
			kid.End()
			if err := p.Shutdown(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, rec := range []bool{tt.root, tt.unsampledKid} {
				if rec {
					want++
				}
			}
			if len(exp.kept) != want {
				t.Errorf("%d spans exported at shutdown; want %d", len(exp.kept), want)
			}
			for _, s := range exp.kept {
				res := map[string]string{}
				for _, kv := range s.Resource.Attributes() {
					res[string(kv.Key)] = kv.Value.Emit()
				}
				if res["service.name"] != "corral-a" || res["service.version"] != "v9.9.9" {
					t.Errorf("resource %v", res)
				}
			}
		})
	}
}

// keptSpans keeps what was exported past Shutdown, which empties an
// InMemoryExporter.
type keptSpans struct {
	*tracetest.InMemoryExporter
	kept tracetest.SpanStubs
}

func (k *keptSpans) Shutdown(ctx context.Context) error {
	k.kept = k.GetSpans()
	return k.InMemoryExporter.Shutdown(ctx)
}

var _ sdktrace.SpanExporter = (*keptSpans)(nil)
