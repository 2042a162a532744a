// Package otlp turns Corral's tracing on from the standard OTEL_*
// environment: an OTLP exporter (HTTP/protobuf or gRPC), the resource
// (service.name and OTEL_RESOURCE_ATTRIBUTES), the sampler, and a batch
// processor, behind a provider that flushes on shutdown.
//
// Tracing is off unless an OTLP endpoint is set
// (OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_EXPORTER_OTLP_ENDPOINT), and
// off whenever OTEL_SDK_DISABLED=true or OTEL_TRACES_EXPORTER=none: a
// gateway nobody asked to trace starts no exporter and records nothing.
//
// The variables that decide what is exported are read here, through the
// Getenv given, so a test can set them without touching the process; the
// exporter's transport details (OTEL_EXPORTER_OTLP_HEADERS,
// _TIMEOUT, _CERTIFICATE, _COMPRESSION, ...) and the batch processor's
// OTEL_BSP_* are read by the OpenTelemetry SDK itself from the process
// environment.
package otlp

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/corralhq/corral/internal/redact"
)

// Variables are the OTEL_* variables New reads itself.
var Variables = []string{
	"OTEL_SDK_DISABLED", "OTEL_TRACES_EXPORTER",
	"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
	"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
	"OTEL_SERVICE_NAME", "OTEL_RESOURCE_ATTRIBUTES",
	"OTEL_TRACES_SAMPLER", "OTEL_TRACES_SAMPLER_ARG",
}

// Reads reports whether tracing reads the variable name: one of
// Variables, or an exporter or batch processor setting the SDK reads
// (OTEL_EXPORTER_OTLP_*, OTEL_BSP_*).
func Reads(name string) bool {
	return slices.Contains(Variables, name) || strings.HasPrefix(name, "OTEL_EXPORTER_OTLP_") || strings.HasPrefix(name, "OTEL_BSP_")
}

// DefaultServiceName is service.name when OTEL_SERVICE_NAME is unset.
const DefaultServiceName = "corral"

// Options configure New.
type Options struct {
	// Getenv reads the environment. Default os.LookupEnv.
	Getenv func(string) (string, bool)
	// Version is service.version ("" leaves it out).
	Version string
	// Exporter replaces the OTLP exporter (tests); nil builds one from
	// the environment.
	Exporter sdktrace.SpanExporter
}

// Provider is the tracer provider and what it owns.
type Provider struct {
	tp *sdktrace.TracerProvider // nil when tracing is off
	// Protocol and Endpoint say where spans go, for the startup log.
	Protocol, Endpoint string
}

// TracerProvider is what the server and the router trace with; nil when
// tracing is off, so that they skip tracing entirely.
func (p *Provider) TracerProvider() trace.TracerProvider {
	if p == nil || p.tp == nil {
		return nil
	}
	return p.tp
}

// Enabled reports whether spans are recorded and exported.
func (p *Provider) Enabled() bool { return p != nil && p.tp != nil }

// Shutdown flushes the spans not yet exported and stops the exporter,
// giving up when ctx ends (the gateway's CORRAL_SHUTDOWN_TIMEOUT).
func (p *Provider) Shutdown(ctx context.Context) error {
	if !p.Enabled() {
		return nil
	}
	if err := p.tp.Shutdown(ctx); err != nil {
		return fmt.Errorf("otlp: shutdown: %w", err)
	}
	return nil
}

// New reads the environment and returns the provider; tracing off is a
// Provider whose TracerProvider is nil, not an error. An error is a
// variable set to a value Corral cannot use.
func New(ctx context.Context, o Options) (*Provider, error) {
	getenv := o.Getenv
	if getenv == nil {
		getenv = os.LookupEnv
	}
	get := func(k string) string { v, _ := getenv(k); return strings.TrimSpace(v) }
	if disabled, _ := strconv.ParseBool(get("OTEL_SDK_DISABLED")); disabled {
		return &Provider{}, nil
	}
	if exp := get("OTEL_TRACES_EXPORTER"); exp != "" && exp != "otlp" {
		if exp == "none" {
			return &Provider{}, nil
		}
		return nil, fmt.Errorf("otlp: OTEL_TRACES_EXPORTER=%q: Corral exports traces over OTLP only (otlp or none)", exp)
	}
	p := &Provider{}
	exporter := o.Exporter
	if exporter == nil {
		endpoint, signal := get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"), true
		if endpoint == "" {
			endpoint, signal = get("OTEL_EXPORTER_OTLP_ENDPOINT"), false
		}
		if endpoint == "" {
			return &Provider{}, nil
		}
		protocol := cmp.Or(get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"), get("OTEL_EXPORTER_OTLP_PROTOCOL"), "http/protobuf")
		var err error
		exporter, err = newExporter(ctx, protocol, endpoint, signal)
		if err != nil {
			return nil, err
		}
		p.Protocol, p.Endpoint = protocol, endpoint
	}
	sampler, err := samplerFrom(get("OTEL_TRACES_SAMPLER"), get("OTEL_TRACES_SAMPLER_ARG"))
	if err != nil {
		return nil, err
	}
	res, err := resourceFrom(get("OTEL_SERVICE_NAME"), get("OTEL_RESOURCE_ATTRIBUTES"), o.Version)
	if err != nil {
		return nil, err
	}
	p.tp = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exporter),
		sdktrace.WithResource(res),
		sdktrace.WithSampler(sampler),
	)
	return p, nil
}

// newExporter builds the OTLP exporter for protocol. The base endpoint
// (OTEL_EXPORTER_OTLP_ENDPOINT) gets /v1/traces appended for HTTP, as the
// specification says; a signal endpoint is used as it is.
func newExporter(ctx context.Context, protocol, endpoint string, signal bool) (sdktrace.SpanExporter, error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return nil, fmt.Errorf("otlp: endpoint %q: want an http:// or https:// URL", redact.URL(endpoint))
	}
	switch protocol {
	case "http/protobuf":
		if !signal {
			u.Path = strings.TrimSuffix(u.Path, "/") + "/v1/traces"
		}
		exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(u.String()))
		if err != nil {
			return nil, fmt.Errorf("otlp: http exporter: %w", err)
		}
		return exp, nil
	case "grpc":
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpointURL(u.String()))
		if err != nil {
			return nil, fmt.Errorf("otlp: grpc exporter: %w", err)
		}
		return exp, nil
	}
	return nil, fmt.Errorf("otlp: protocol %q: want http/protobuf or grpc", protocol)
}

// samplerFrom is the OTEL_TRACES_SAMPLER sampler; the default is
// parentbased_always_on (a sampled client trace is always continued, an
// unsampled one never, a request without one always sampled).
func samplerFrom(name, arg string) (sdktrace.Sampler, error) {
	ratio := func() (float64, error) {
		if arg == "" {
			return 1, nil
		}
		f, err := strconv.ParseFloat(arg, 64)
		if err != nil || f < 0 || f > 1 {
			return 0, fmt.Errorf("otlp: OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
		}
		return f, nil
	}
	switch name {
	case "", "parentbased_always_on":
		return sdktrace.ParentBased(sdktrace.AlwaysSample()), nil
	case "always_on":
		return sdktrace.AlwaysSample(), nil
	case "always_off":
		return sdktrace.NeverSample(), nil
	case "parentbased_always_off":
		return sdktrace.ParentBased(sdktrace.NeverSample()), nil
	case "traceidratio", "parentbased_traceidratio":
		f, err := ratio()
		if err != nil {
			return nil, err
		}
		if name == "traceidratio" {
			return sdktrace.TraceIDRatioBased(f), nil
		}
		return sdktrace.ParentBased(sdktrace.TraceIDRatioBased(f)), nil
	}
	return nil, fmt.Errorf("otlp: OTEL_TRACES_SAMPLER=%q: want always_on, always_off, traceidratio or their parentbased_ forms", name)
}

// resourceFrom is the resource every span carries: service.name
// (OTEL_SERVICE_NAME, default corral), service.version, and the
// key=value pairs of OTEL_RESOURCE_ATTRIBUTES (values percent-encoded),
// over which OTEL_SERVICE_NAME wins.
func resourceFrom(service, attrs, version string) (*resource.Resource, error) {
	var kvs []attribute.KeyValue
	for pair := range strings.SplitSeq(attrs, ",") {
		if strings.TrimSpace(pair) == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("otlp: OTEL_RESOURCE_ATTRIBUTES: %q is not key=value", pair)
		}
		val, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("otlp: OTEL_RESOURCE_ATTRIBUTES: %q: %w", pair, err)
		}
		if k == "service.name" && service == "" {
			service = val
			continue
		}
		kvs = append(kvs, attribute.String(k, val))
	}
	kvs = append(kvs, attribute.String("service.name", cmp.Or(service, DefaultServiceName)))
	if version != "" {
		kvs = append(kvs, attribute.String("service.version", version))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(kvs...))
	if err != nil && !errors.Is(err, resource.ErrSchemaURLConflict) {
		return nil, fmt.Errorf("otlp: resource: %w", err)
	}
	return res, nil
}
