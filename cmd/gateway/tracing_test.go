package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/tenant"
	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver: it decodes each export
// request's protobuf body and hands it over on a channel.
func otlpReceiver(t *testing.T) (*httptest.Server, <-chan *coltracepb.ExportTraceServiceRequest) {
	t.Helper()
	got := make(chan *coltracepb.ExportTraceServiceRequest, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" {
			t.Errorf("export: %s %s %s; want POST /v1/traces application/x-protobuf", r.Method, r.URL.Path, r.Header.Get("Content-Type"))
			http.Error(w, "no", http.StatusNotFound)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("export body: %v", err)
			return
		}
		var req coltracepb.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			t.Errorf("export body is no ExportTraceServiceRequest: %v", err)
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		got <- &req
		out, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write(out)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

// drainSpans reads every export request received so far: their bytes as
// sent, to scan for what no span may hold, and their spans.
func drainSpans(t *testing.T, got <-chan *coltracepb.ExportTraceServiceRequest) (all []byte, spans []*tracepb.Span) {
	t.Helper()
	for len(got) > 0 {
		req := <-got
		b, err := proto.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, b...)
		for _, rs := range req.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				spans = append(spans, ss.GetSpans()...)
			}
		}
	}
	return all, spans
}

func attrMap(kvs []*commonpb.KeyValue) map[string]string {
	out := map[string]string{}
	for _, kv := range kvs {
		switch v := kv.GetValue().GetValue().(type) {
		case *commonpb.AnyValue_StringValue:
			out[kv.GetKey()] = v.StringValue
		case *commonpb.AnyValue_IntValue:
			out[kv.GetKey()] = strconv.FormatInt(v.IntValue, 10)
		}
	}
	return out
}

// TestRunExportsTracesOverOTLP: a gateway started with an OTLP endpoint
// exports its spans to it, over HTTP/protobuf, with the resource from
// OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, continuing the client's
// trace; shutting down flushes them, and the access log names the trace.
func TestRunExportsTracesOverOTLP(t *testing.T) {
	recv, got := otlpReceiver(t)
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-demo"}, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + t.TempDir(),
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL, "OTEL_SERVICE_NAME=corral-ci",
			"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=ci,service.namespace=llm%20gateways"}, stdout, stderr)
	}()
	base := stdout.waitFor(t, regexp.MustCompile(`base URL: (http://\S+)`))[1]
	const traceID = "0af7651916cd43dd8448eb211c80319c"
	req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"export me"}]}`))
	req.Header.Set("Authorization", "Bearer "+DemoKey)
	req.Header.Set("Traceparent", "00-"+traceID+"-b7ad6b7169203331-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("chat = %d", resp.StatusCode)
	}
	cancel() // shutdown flushes the batch
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	// run has returned, so the exporter has flushed and stopped: every
	// export is in the channel.
	var names []string
	var server map[string]string
	batches := 0
	for len(got) > 0 {
		req := <-got
		batches++
		for _, rs := range req.GetResourceSpans() {
			res := attrMap(rs.GetResource().GetAttributes())
			if res["service.name"] != "corral-ci" || res["deployment.environment.name"] != "ci" || res["service.namespace"] != "llm gateways" {
				t.Errorf("resource = %v; want service.name corral-ci and the OTEL_RESOURCE_ATTRIBUTES", res)
			}
			for _, ss := range rs.GetScopeSpans() {
				if ss.GetScope().GetName() != "github.com/corralhq/corral" {
					t.Errorf("scope = %q", ss.GetScope().GetName())
				}
				for _, sp := range ss.GetSpans() {
					names = append(names, sp.GetName())
					if sp.GetName() == "POST /v1/chat/completions" {
						server = attrMap(sp.GetAttributes())
						if hexOf(sp.GetTraceId()) != traceID {
							t.Errorf("server span trace id %s; want the client's %s", hexOf(sp.GetTraceId()), traceID)
						}
					}
				}
			}
		}
	}
	if batches == 0 {
		t.Fatal("the receiver got no export")
	}
	if server["corral.tenant"] != DemoTenant || server["corral.cache"] != "MISS" || server["http.response.status_code"] != "200" {
		t.Errorf("server span attributes %v", server)
	}
	for _, want := range []string{"corral.cache.lookup", "corral.flight", "chat gpt-4o-mini"} {
		if !strings.Contains(strings.Join(names, ","), want) {
			t.Errorf("exported spans %v lack %q", names, want)
		}
	}
	if !regexp.MustCompile(`"msg":"request".*"trace_id":"` + traceID + `"`).MatchString(stderr.String()) {
		t.Errorf("the access log line lacks the trace id:\n%s", stderr)
	}
}

func hexOf(b []byte) string { return hex.EncodeToString(b) }

// TestNoSecretsInTraces: a gateway exporting traces, driven through the
// admin API (a tenant, a key, its use, its revoke, a key pasted as a
// name) and the /v1 API with that key, exports no tenant key, key hash or
// admin token in any span, attribute or resource.
func TestNoSecretsInTraces(t *testing.T) {
	recv, got := otlpReceiver(t)
	up := serveMock(t, mockllm.Options{})
	const token = "adm-token-that-no-span-may-carry"
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr := newLineWriter(), newLineWriter()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, nil, []string{"CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR=" + t.TempDir(),
			"CORRAL_UPSTREAM_URL=" + up.URL + "/v1", "CORRAL_ADMIN_TOKEN=" + token,
			"OTEL_EXPORTER_OTLP_ENDPOINT=" + recv.URL}, stdout, stderr)
	}()
	addr := stderr.waitFor(t, regexp.MustCompile(`"msg":"corral listening","addr":"([^"]+)"`))[1]
	base := "http://" + addr
	if code, out := adminCallWith(t, base, token, "POST", "/admin/tenants", `{"id":"traced"}`); code != http.StatusCreated {
		t.Fatalf("create the tenant: %d %v", code, out)
	}
	code, out := adminCallWith(t, base, token, "POST", "/admin/tenants/traced/keys", `{"name":"ci"}`)
	if code != http.StatusCreated {
		t.Fatalf("create a key: %d %v", code, out)
	}
	key, keyID := out["key"].(string), out["id"].(string)
	if code := chatCode(t, base, key, "a traced call"); code != 200 {
		t.Fatalf("chat with the new key: %d", code)
	}
	adminCallWith(t, base, token, "DELETE", "/admin/tenants/traced/keys/"+keyID, "")
	if code := chatCode(t, base, key, "after the revoke"); code != 401 {
		t.Fatalf("chat with the revoked key: %d", code)
	}
	adminCallWith(t, base, token, "POST", "/admin/tenants/traced/keys", `{"name":"`+key+`"}`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
	all, exported := drainSpans(t, got)
	if spans := len(exported); spans < 6 {
		t.Fatalf("%d spans exported; want one per request at least", spans)
	}
	for what, s := range map[string]string{"key": key, "key hash": tenant.HashKey(key), "key without prefix": strings.TrimPrefix(key, "sk-corral-"), "admin token": token} {
		if bytes.Contains(all, []byte(s)) {
			t.Errorf("the %s is in an exported span", what)
		}
	}
}
