package otlp

import (
	"context"
	"net"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/grpc"
)

// traceService is an OTLP/gRPC trace receiver handing each export over.
type traceService struct {
	coltracepb.UnimplementedTraceServiceServer
	got chan *coltracepb.ExportTraceServiceRequest
}

func (s *traceService) Export(_ context.Context, req *coltracepb.ExportTraceServiceRequest) (*coltracepb.ExportTraceServiceResponse, error) {
	s.got <- req
	return &coltracepb.ExportTraceServiceResponse{}, nil
}

// TestExportsOverGRPC: OTEL_EXPORTER_OTLP_PROTOCOL=grpc sends the spans to
// a gRPC receiver, with the resource, when the provider shuts down.
func TestExportsOverGRPC(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	svc := &traceService{got: make(chan *coltracepb.ExportTraceServiceRequest, 10)}
	srv := grpc.NewServer()
	coltracepb.RegisterTraceServiceServer(srv, svc)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})

	p, err := New(context.Background(), Options{Getenv: envOf(
		"OTEL_EXPORTER_OTLP_ENDPOINT", "http://"+ln.Addr().String(),
		"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc",
		"OTEL_SERVICE_NAME", "corral-grpc")})
	if err != nil || !p.Enabled() || p.Protocol != "grpc" {
		t.Fatalf("provider: %v enabled=%v protocol=%q", err, p.Enabled(), p.Protocol)
	}
	_, span := p.TracerProvider().Tracer("test").Start(context.Background(), "over grpc")
	span.End()
	if err := p.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(svc.got) == 0 {
		t.Fatal("no export reached the gRPC receiver by shutdown")
	}
	req := <-svc.got
	rs := req.GetResourceSpans()
	if len(rs) != 1 || len(rs[0].GetScopeSpans()) != 1 || rs[0].GetScopeSpans()[0].GetSpans()[0].GetName() != "over grpc" {
		t.Fatalf("export = %v", req)
	}
	name := ""
	for _, kv := range rs[0].GetResource().GetAttributes() {
		if kv.GetKey() == "service.name" {
			name = kv.GetValue().GetStringValue()
		}
	}
	if name != "corral-grpc" {
		t.Errorf("service.name = %q; want corral-grpc", name)
	}
}
