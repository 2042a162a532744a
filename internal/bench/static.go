package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"time"
)

// The static handler is the hit scenario's ceiling: a bare net/http
// handler that answers every request with the bytes and headers of one
// memory hit, captured from a primed gateway. Corral's hit ÷ static is
// the share of the HTTP stack's own limit a hit reaches. It runs as its
// own process, like the floor (roleEnv=static).
const staticFileEnv = "CORRAL_BENCH_STATIC_FILE"

// staticAnswer is a captured answer: what the static handler sends.
type staticAnswer struct {
	Status int         `json:"status"`
	Header http.Header `json:"header"`
	Body   []byte      `json:"body"`
}

// captureAnswer sends body once to url and returns the answer as the
// static handler will replay it (without Date, which net/http writes).
func captureAnswer(ctx context.Context, url string, hdr http.Header, body []byte) (staticAnswer, error) {
	c := newClient(1)
	defer c.CloseIdleConnections()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return staticAnswer{}, err
	}
	req.Header = hdr
	resp, err := c.Do(req)
	if err != nil {
		return staticAnswer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return staticAnswer{}, err
	}
	h := resp.Header.Clone()
	h.Del("Date")
	return staticAnswer{Status: resp.StatusCode, Header: h, Body: b}, nil
}

// ServeStatic answers every request on addr with the answer in file
// until ctx ends: the request body is read and dropped, the headers are
// pre-built once, and the body is one Write.
func ServeStatic(ctx context.Context, addr, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	var a staticAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	a.Header.Set("Content-Length", strconv.Itoa(len(a.Body)))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		wh := w.Header()
		for k, v := range a.Header {
			wh[k] = v
		}
		w.WriteHeader(a.Status)
		_, _ = w.Write(a.Body)
	})
	return serveRole(ctx, addr, h)
}

// startStatic writes a to the run's directory and starts the static
// handler on the proxy CPU.
func (c *cluster) startStatic(ctx context.Context, a staticAnswer) (*proc, error) {
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	file := c.dir + "/static-answer.json"
	if err := os.WriteFile(file, b, 0o600); err != nil {
		return nil, err
	}
	return c.startServer(ctx, "static", proxyCPU, "/mock/stats", func(addr string) ([]string, []string) {
		env := childEnv(roleEnv+"=static", floorAddrEnv+"="+addr, staticFileEnv+"="+file)
		return env, c.floorCmd
	})
}
