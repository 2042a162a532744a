package config

import (
	"net/url"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// collectorConfig is the part of the collector's config the traces'
// path through compose depends on.
type collectorConfig struct {
	Receivers struct {
		OTLP struct {
			Protocols map[string]struct {
				Endpoint string `yaml:"endpoint"`
			} `yaml:"protocols"`
		} `yaml:"otlp"`
	} `yaml:"receivers"`
	Exporters map[string]struct {
		Endpoint string `yaml:"endpoint"`
	} `yaml:"exporters"`
	Service struct {
		Pipelines map[string]struct {
			Receivers []string `yaml:"receivers"`
			Exporters []string `yaml:"exporters"`
		} `yaml:"pipelines"`
	} `yaml:"service"`
}

// TestComposeTracing checks the observability profile's traces against
// the code and each other: the endpoint the compose header tells
// operators to set reaches the collector's OTLP/HTTP receiver, the
// collector's traces pipeline forwards to the Jaeger service's OTLP port,
// and Jaeger's UI is published on loopback only. The gateway passes the
// OTEL_* variables the telemetry package reads.
func TestComposeTracing(t *testing.T) {
	services := loadCompose(t)
	for _, name := range []string{"otel-collector", "jaeger"} {
		if s, ok := services[name]; !ok || !slices.Equal(s.Profiles, []string{"observability"}) {
			t.Fatalf("compose needs a %s service under the observability profile", name)
		}
	}
	col, jaeger := services["otel-collector"], services["jaeger"]
	if !strings.HasPrefix(col.Image, "otel/opentelemetry-collector-contrib:") || !strings.HasPrefix(jaeger.Image, "jaegertracing/jaeger:") ||
		strings.HasSuffix(col.Image, ":latest") || strings.HasSuffix(jaeger.Image, ":latest") {
		t.Errorf("images %q, %q; want pinned otel/opentelemetry-collector-contrib and jaegertracing/jaeger", col.Image, jaeger.Image)
	}
	var cfgPath string
	for _, a := range col.Command {
		if p, ok := strings.CutPrefix(a, "--config="); ok {
			cfgPath = p
		}
	}
	src := col.mount(cfgPath)
	if cfgPath == "" || src == "" {
		t.Fatalf("the collector's --config %q is not a mounted file (command %v)", cfgPath, col.Command)
	}
	var cc collectorConfig
	readYAML(t, src, &cc)

	// The endpoint operators are told to set is the collector's HTTP receiver.
	gw := services["gateway"]
	for _, k := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_SERVICE_NAME", "OTEL_TRACES_SAMPLER"} {
		if _, ok := gw.Environment[k]; !ok {
			t.Errorf("the gateway does not pass %s", k)
		}
	}
	if got := gw.Environment["OTEL_EXPORTER_OTLP_ENDPOINT"]; got != "${OTEL_EXPORTER_OTLP_ENDPOINT:-}" {
		t.Errorf("gateway OTEL_EXPORTER_OTLP_ENDPOINT = %q; want it from the shell, empty (tracing off) by default", got)
	}
	header, err := os.ReadFile(repo + "docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`OTEL_EXPORTER_OTLP_ENDPOINT=(http://\S+)`).FindSubmatch(header)
	if m == nil {
		t.Fatal("the compose header does not say which OTEL_EXPORTER_OTLP_ENDPOINT to set")
	}
	u, err := url.Parse(string(m[1]))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := services[u.Hostname()]; !ok || u.Hostname() != "otel-collector" {
		t.Errorf("the header's endpoint %s is not the otel-collector service", u)
	}
	httpRecv := cc.Receivers.OTLP.Protocols["http"].Endpoint
	if !strings.HasSuffix(httpRecv, ":"+u.Port()) || !strings.HasPrefix(httpRecv, "0.0.0.0:") {
		t.Errorf("collector OTLP/HTTP receiver %q does not listen on the header's port %s on every interface", httpRecv, u.Port())
	}

	// The traces pipeline goes from that receiver to Jaeger's OTLP/gRPC.
	p, ok := cc.Service.Pipelines["traces"]
	if !ok || !slices.Contains(p.Receivers, "otlp") || len(p.Exporters) != 1 {
		t.Fatalf("collector traces pipeline %+v; want the otlp receiver and one exporter", p)
	}
	exp, ok := cc.Exporters[p.Exporters[0]]
	if !ok || exp.Endpoint != "jaeger:4317" {
		t.Errorf("the traces exporter %q sends to %q; want the jaeger service's OTLP/gRPC port, jaeger:4317", p.Exporters[0], exp.Endpoint)
	}
	if !slices.Equal(jaeger.Ports, []string{"127.0.0.1:16686:16686"}) {
		t.Errorf("jaeger ports %v; want only its UI, on loopback", jaeger.Ports)
	}
	if len(col.Ports) != 0 {
		t.Errorf("collector ports %v; want none published (the gateways reach it on the compose network)", col.Ports)
	}
}
