package server

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestHugeExponentRefusedInLinearTime holds fault 2 of issue 13: a number
// with an exponent of millions of digits cost time quadratic in its length
// (8 MB: minutes of CPU) on every path that keys or checks a body. It is now
// a 400 within one linear scan, on cached paths and a proxied one.
func TestHugeExponentRefusedInLinearTime(t *testing.T) {
	h := newHarness(t)
	exp := strings.Repeat("9", 7<<20)
	for _, path := range []string{"/v1/chat/completions", "/v1/responses", "/v1/moderations"} {
		body := []byte(`{"model":"gpt-4o-mini","messages":[],"seed":1e` + exp + `}`)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+path, strings.NewReader(string(body)))
		req.Header.Set("Authorization", "Bearer "+limitedKey)
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v after %v", path, err, time.Since(start))
		}
		typ, code, _ := openAIError(t, resp)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != 400 || typ != "invalid_request_error" || code != "invalid_request_error" {
			t.Errorf("%s: %d %s %s; want 400 invalid_request_error", path, resp.StatusCode, typ, code)
		}
		// A linear scan of 7 MiB takes milliseconds; the quadratic one took minutes.
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s: refused after %v; want a linear-time refusal", path, d)
		}
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("refused requests reached the upstream %d times; want 0", n)
	}
}
