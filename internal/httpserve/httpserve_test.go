package httpserve

import (
	"context"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestServeCutsWhatOutlivesTheGrace: a request that never ends is cut
// after the grace period, and Serve says so.
func TestServeCutsWhatOutlivesTheGrace(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	inside := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(inside)
		<-r.Context().Done() // hangs until the connection is cut
	})}
	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		cut bool
		err error
	}
	done := make(chan result, 1)
	stopping := make(chan struct{})
	go func() {
		cut, err := Serve(ctx, srv, ln, 50*time.Millisecond, func() { close(stopping) })
		done <- result{cut, err}
	}()
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err == nil {
			resp.Body.Close()
		}
	}()
	<-inside
	cancel()
	<-stopping
	if r := <-done; !r.cut || r.err != nil {
		t.Errorf("Serve = cut %v, %v; want cut, no error", r.cut, r.err)
	}
}

// TestServeReturnsServeErrors: a listener that fails is an error at once.
func TestServeReturnsServeErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := Serve(context.Background(), &http.Server{}, ln, time.Second, nil); err == nil {
		t.Error("Serve on a closed listener returned nil")
	}
}
