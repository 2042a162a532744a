package upstream

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/trace"
)

// headerRecorder is an upstream that records each request's headers and
// answers an empty chat completion list.
type headerRecorder struct {
	srv  *httptest.Server
	mu   sync.Mutex // protects last
	last http.Header
}

func newHeaderRecorder(t *testing.T) *headerRecorder {
	h := &headerRecorder{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.last = r.Header.Clone()
		h.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	t.Cleanup(h.srv.Close)
	return h
}

// forwarded sends one call with the client headers hdr and returns what
// the upstream received.
func (h *headerRecorder) forwarded(t *testing.T, ctx context.Context, o Options, hdr http.Header) http.Header {
	t.Helper()
	o.BaseURL = h.srv.URL + "/v1"
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	resp, err := c.Do(ctx, Request{Method: http.MethodGet, Path: "/chat/completions", Header: hdr})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.last
}

// A client's tracestate goes upstream only when it is valid W3C Trace
// Context; anything else is dropped, not passed on as sent.
func TestOnlyAValidTracestateIsForwarded(t *testing.T) {
	many := make([]string, 33)
	for i := range many {
		many[i] = "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)) + "=v"
	}
	tests := []struct {
		give []string // the client's tracestate header lines
		want string   // "" = none forwarded
	}{
		{[]string{"congo=t61rcWkgMzE"}, "congo=t61rcWkgMzE"},
		{[]string{"rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"}, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{[]string{"rojo=00f067aa0ba902b7", "congo=t61rcWkgMzE"}, "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE"},
		{[]string{"tenant@vendor=x"}, "tenant@vendor=x"},
		{[]string{"no-equals-sign"}, ""},
		{[]string{"UPPER=x"}, ""},
		{[]string{"k=a=b"}, ""},                 // "=" in a value
		{[]string{"k=a,k=b"}, ""},               // a key twice
		{[]string{"k=\x01"}, ""},                // a control character
		{[]string{"k=v", "<script>=1"}, ""},     // one bad line spoils the list
		{[]string{strings.Join(many, ",")}, ""}, // 33 list-members
		{[]string{strings.Join(many[:32], ",")}, strings.Join(many[:32], ",")},
	}
	up := newHeaderRecorder(t)
	for _, tt := range tests {
		hdr := http.Header{"Tracestate": tt.give}
		got := up.forwarded(t, context.Background(), Options{}, hdr)
		if v := strings.Join(got.Values("Tracestate"), ","); v != tt.want {
			t.Errorf("tracestate %q forwarded as %q; want %q", tt.give, v, tt.want)
		}
	}
}

// A client's baggage goes upstream only with ForwardBaggage
// (CORRAL_FORWARD_BAGGAGE=true), whether it comes as the client's header
// (tracing off) or from the request's context (tracing on: the server
// read it into the context).
func TestBaggageIsForwardedOnlyWhenAsked(t *testing.T) {
	up := newHeaderRecorder(t)
	member, _ := baggage.NewMember("user.id", "alice")
	bag, _ := baggage.New(member)
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled})
	traced := baggage.ContextWithBaggage(trace.ContextWithSpanContext(context.Background(), sc), bag)
	tests := []struct {
		name    string
		ctx     context.Context
		forward bool
		want    string
	}{
		{"untraced, off", context.Background(), false, ""},
		{"untraced, on", context.Background(), true, "user.id=alice"},
		{"traced, off", traced, false, ""},
		{"traced, on", traced, true, "user.id=alice"},
	}
	for _, tt := range tests {
		hdr := http.Header{"Baggage": {"user.id=alice"}}
		got := up.forwarded(t, tt.ctx, Options{ForwardBaggage: tt.forward}, hdr)
		if v := got.Get("Baggage"); v != tt.want {
			t.Errorf("%s: baggage forwarded as %q; want %q", tt.name, v, tt.want)
		}
		if tt.ctx == traced && !strings.Contains(got.Get("Traceparent"), sc.TraceID().String()) {
			t.Errorf("%s: traceparent %q does not carry the trace", tt.name, got.Get("Traceparent"))
		}
	}
}
