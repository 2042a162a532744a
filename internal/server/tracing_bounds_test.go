package server

import (
	"context"
	"net/http"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/corralhq/corral/internal/telemetry"
)

// TestTraceBoundsClientText: what a client chooses (its request method,
// its path, its model name) reaches span names and attributes bounded, so
// one request cannot make a span the collector refuses (and with it the
// batch of every other tenant's spans), nor mint span names at will.
func TestTraceBoundsClientText(t *testing.T) {
	l := newSpanLog()
	h := newHarness(t, traced(l))

	long := strings.Repeat("x", 64<<10)
	req, err := http.NewRequest("BREW"+long[:1000], h.gw.URL+"/"+long, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	odd := l.until(t, "the server span of the odd method", func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		for _, s := range ended {
			if strings.HasPrefix(s.Name(), telemetry.OtherMethod) {
				return true
			}
		}
		return false
	})
	srv := odd[len(odd)-1]
	if got := attrs(srv)["http.request.method"]; got != telemetry.OtherMethod {
		t.Errorf("http.request.method = %.40q; want %q", got, telemetry.OtherMethod)
	}
	if got := attrs(srv)["url.path"].(string); got != "/"+long[:telemetry.MaxValueLen-1] {
		t.Errorf("url.path is %d bytes; want the path cut to %d", len(got), telemetry.MaxValueLen)
	}

	chat := send(context.Background(), h.gw.URL, acmeKey, `{"model":"`+long+`","messages":[{"role":"user","content":"long model"}]}`)
	if chat.err != nil {
		t.Fatal(chat.err)
	}
	spans := l.until(t, "the chat's attempt span", func(_ []string, ended []sdktrace.ReadOnlySpan) bool {
		for _, s := range ended {
			if strings.HasPrefix(s.Name(), "chat ") {
				return true
			}
		}
		return false
	})
	for _, s := range spans {
		if len(s.Name()) > len("chat ")+telemetry.MaxValueLen {
			t.Errorf("span %.40q… has a %d-byte name", s.Name(), len(s.Name()))
		}
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); len(v) > telemetry.MaxValueLen {
				t.Errorf("span %.40q… attribute %s is %d bytes", s.Name(), kv.Key, len(v))
			}
		}
	}
}

// TestTraceMalformedContext: a traceparent that is malformed or huge
// starts a trace of Corral's own (no error, no remote parent), and the
// upstream gets that trace's traceparent, not the client's text.
func TestTraceMalformedContext(t *testing.T) {
	l := newSpanLog()
	h := newHarness(t, traced(l))
	bad := []string{
		"00-" + clientTraceID + "-" + clientSpanID + "-01" + strings.Repeat("-ff", 20000), // huge
		"00-" + strings.Repeat("0", 32) + "-" + clientSpanID + "-01",                      // all-zero trace id
		"zz-" + clientTraceID + "-" + clientSpanID + "-01",                                // bad version
		"00-" + clientTraceID + "-" + clientSpanID,                                        // no flags
	}
	for i, tp := range bad {
		a := send(context.Background(), h.gw.URL, acmeKey, chatBody("malformed "+string(rune('a'+i))), "Traceparent", tp)
		if a.status != 200 {
			t.Fatalf("traceparent %.40q…: status %d %s", tp, a.status, a.body)
		}
	}
	spans := l.endedN(t, "POST /v1/chat/completions", len(bad))
	seen := h.seenHeaders()
	if len(seen) != len(bad) {
		t.Fatalf("upstream calls = %d; want %d", len(seen), len(bad))
	}
	sent := map[string]bool{} // the trace ids of the upstream's traceparents
	for _, hd := range seen {
		tp := hd.Get("Traceparent")
		if len(tp) != 55 || !strings.HasPrefix(tp, "00-") {
			t.Errorf("upstream traceparent %.60q; want a well-formed one", tp)
			continue
		}
		sent[tp[3:35]] = true
	}
	for i, srv := range named(spans, "POST /v1/chat/completions") {
		if srv.Parent().IsValid() {
			t.Errorf("server span %d has parent %v; want a root span", i, srv.Parent().SpanID())
		}
		if !sent[srv.SpanContext().TraceID().String()] {
			t.Errorf("server span %d's trace reached no upstream call", i)
		}
	}
}
