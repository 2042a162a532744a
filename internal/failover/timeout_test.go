package failover

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/upstream"
)

// An answer that stalls after its headers is cut by whichever deadline
// fires first, the router's or the client's (cmd/gateway gives both the
// upstream timeout): either way its read error is a Timeout, never a
// client's cancel, which the server would answer with nothing at all.
func TestStallAfterHeadersIsATimeout(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_ = http.NewResponseController(w).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	const timeout = 200 * time.Millisecond
	c, err := upstream.New(upstream.Options{BaseURL: srv.URL + "/v1", APIKey: "k", Timeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	r := Single("default", "openai", c, Options{Timeout: timeout})
	resp, err := r.Do(context.Background(), "openai", "m", upstream.Request{Method: http.MethodPost, Path: "/chat/completions", Body: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	if k := upstream.KindOf(err); k != upstream.Timeout {
		t.Errorf("read error %v is of kind %v; want %v", err, k, upstream.Timeout)
	}
}
