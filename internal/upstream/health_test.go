package upstream

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/ok/models":
			_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
		case "/denied/models":
			w.WriteHeader(http.StatusUnauthorized)
		case "/broken/models":
			w.WriteHeader(http.StatusBadGateway)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()

	tests := []struct {
		give string // base URL
		want []string
	}{
		{srv.URL + "/ok", nil},
		{srv.URL, []string{"GET " + srv.URL + "/models answered 404", "version path"}},
		{srv.URL + "/denied", []string{"/denied/models answered 401", "CORRAL_UPSTREAM_API_KEY"}},
		{srv.URL + "/broken", []string{"/broken/models answered 502"}},
		{dead, []string{"GET " + dead + "/models"}},
	}
	for _, tt := range tests {
		c, err := New(Options{BaseURL: tt.give, APIKey: "sk-secret-upstream"})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Check(context.Background())
		if tt.want == nil {
			if err != nil {
				t.Errorf("Check(%s) = %v; want nil", tt.give, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("Check(%s) = nil; want an error", tt.give)
			continue
		}
		for _, w := range tt.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Check(%s) = %q; want it to contain %q", tt.give, err, w)
			}
		}
		if strings.Contains(err.Error(), "sk-secret-upstream") {
			t.Errorf("Check(%s) error contains the upstream key", tt.give)
		}
	}
}

func TestCheckRedactsCredentials(t *testing.T) {
	c, err := New(Options{BaseURL: "http://user:hunter2@127.0.0.1:1/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(context.Background()); err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Check = %v; want an error without the URL's password", err)
	}
}

// A base URL's query and a client's query can carry a key (some providers
// take one as ?key=): neither may reach the error a failed call returns,
// which the access log prints.
func TestCallErrorsRedactTheQuery(t *testing.T) {
	c, err := New(Options{BaseURL: "http://user:hunter2@127.0.0.1:1/v1?key=sk-base-secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Do(context.Background(), Request{Method: http.MethodGet, Path: "/models", RawQuery: "token=sk-client-secret"})
	if err == nil {
		t.Fatal("Do against a closed port succeeded")
	}
	for _, secret := range []string{"hunter2", "sk-base-secret", "sk-client-secret"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("Do error %q contains %q", err, secret)
		}
	}
	if !strings.Contains(err.Error(), "127.0.0.1:1/v1/models?redacted") {
		t.Errorf("Do error %q does not name the URL it called", err)
	}
	if err := c.Check(context.Background()); err == nil || strings.Contains(err.Error(), "sk-base-secret") {
		t.Errorf("Check = %v; want an error without the base URL's query", err)
	}
}
