package server

import (
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestProxyFlushesBodyOfUnknownLength: a proxied body without a length
// (chunked, as a slow upstream sends it) reaches the client as it comes,
// not when the upstream has finished.
func TestProxyFlushesBodyOfUnknownLength(t *testing.T) {
	proceed := make(chan struct{})
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/organization/usage" {
					next.ServeHTTP(w, r)
					return
				}
				_, _ = io.WriteString(w, "first ")
				http.NewResponseController(w).Flush()
				select {
				case <-proceed:
				case <-r.Context().Done():
					return
				}
				_, _ = io.WriteString(w, "second")
			})
		}
	})
	req, _ := http.NewRequest(http.MethodGet, h.gw.URL+"/v1/organization/usage", nil)
	req.Header.Set("Authorization", "Bearer "+acmeKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	first := make(chan string, 1)
	go func() {
		b := make([]byte, len("first "))
		_, _ = io.ReadFull(resp.Body, b)
		first <- string(b)
	}()
	select {
	case got := <-first:
		if got != "first " {
			t.Fatalf("first part = %q", got)
		}
	case <-time.After(5 * time.Second):
		close(proceed)
		t.Fatal("the first part did not reach the client while the upstream was still sending")
	}
	close(proceed)
	rest, _ := io.ReadAll(resp.Body)
	if string(rest) != "second" {
		t.Errorf("rest = %q; want second", rest)
	}
}

// panickyWriter panics when the status is written, as a broken writer
// below the handler could.
type panickyWriter struct{ http.ResponseWriter }

func (panickyWriter) WriteHeader(int) { panic("write header") }

// The headers of a stream are flushed by a helper goroutine
// (startEvents); a panic there must reach the handler's goroutine, where
// the recoverer catches it, instead of ending the process.
func TestStartEventsRaisesTheFlushPanicOnTheHandlersGoroutine(t *testing.T) {
	s := &Server{}
	defer func() {
		if v := recover(); v != "write header" {
			t.Fatalf("recovered %v, want the helper's panic", v)
		}
	}()
	s.startEvents(panickyWriter{httptest.NewRecorder()}, errorFormat)
	t.Fatal("startEvents returned after the flush panicked")
}
