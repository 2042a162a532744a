package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// wrongKeyAgent names the wrong-key run, whose requests are not written.
const wrongKeyAgent = "claude-wrong-key"

// maxFixtures bounds the fixtures written per agent run.
const maxFixtures = 2

// keyPlaceholder replaces every key value in a recorded header.
const keyPlaceholder = "<KEY>"

// recordedHeaders are the request headers a fixture keeps: those that
// decide how Corral routes, keys or answers a request, and the client's
// name. The key headers keep their name and lose their value.
var recordedHeaders = []string{
	"Accept", "Anthropic-Beta", "Anthropic-Version", "Anthropic-Dangerous-Direct-Browser-Access",
	"Content-Type", "OpenAI-Beta", "Originator", "User-Agent", "X-App", "X-Stainless-Lang",
	"X-Stainless-Package-Version", "X-Stainless-Retry-Count", "X-Stainless-Timeout",
}

var keyHeaders = map[string]string{"Authorization": "Bearer " + keyPlaceholder, "X-Api-Key": keyPlaceholder, "Api-Key": keyPlaceholder}

// Fixture is one recorded request, as internal/server's tests read it.
type Fixture struct {
	Agent   string            `json:"agent"` // "codex" or "claude"
	Method  string            `json:"method"`
	Path    string            `json:"path"` // with its query
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"` // verbatim
	Status  int               `json:"status"`
}

// recorder is a reverse proxy to the gateway that keeps every request.
type recorder struct {
	proxy *httputil.ReverseProxy
	srv   *http.Server
	base  string

	mu       sync.Mutex // guards agent, fixtures and done
	agent    string     // the agent now running, for the fixtures
	fixtures []Fixture
	done     int // requests whose answer has been relayed
}

func startRecorder(target string) (*recorder, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("recorder: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("recorder: listen: %w", err)
	}
	rc := &recorder{base: "http://" + ln.Addr().String()}
	rc.proxy = httputil.NewSingleHostReverseProxy(u)
	rc.proxy.FlushInterval = -1
	rc.proxy.ModifyResponse = func(resp *http.Response) error {
		if i, ok := resp.Request.Context().Value(fixtureIndex{}).(int); ok {
			rc.mu.Lock()
			rc.fixtures[i].Status = resp.StatusCode
			rc.mu.Unlock()
		}
		return nil
	}
	rc.srv = &http.Server{Handler: rc}
	go func() { _ = rc.srv.Serve(ln) }()
	return rc, nil
}

type fixtureIndex struct{}

// ServeHTTP records r and relays it.
func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "recorder: read body", http.StatusBadGateway)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	f := Fixture{Method: r.Method, Path: r.URL.RequestURI(), Headers: map[string]string{}, Body: string(body)}
	for _, h := range recordedHeaders {
		if v := r.Header.Get(h); v != "" {
			f.Headers[h] = v
		}
	}
	for h, placeholder := range keyHeaders {
		if r.Header.Get(h) != "" {
			f.Headers[h] = placeholder
		}
	}
	rc.mu.Lock()
	f.Agent = rc.agent
	rc.fixtures = append(rc.fixtures, f)
	i := len(rc.fixtures) - 1
	rc.mu.Unlock()

	rc.proxy.ServeHTTP(w, r.WithContext(contextWith(r, i)))
	rc.mu.Lock()
	rc.done++
	rc.mu.Unlock()
}

// begin names the agent whose requests follow and returns the number of
// requests relayed so far.
func (rc *recorder) begin(agent string) int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.agent = agent
	return rc.done
}

// calls returns the API requests (paths under /v1/) of agent so far.
func (rc *recorder) calls(agent string) []Fixture {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []Fixture
	for _, f := range rc.fixtures {
		if f.Agent == agent && strings.HasPrefix(f.Path, "/v1/") {
			out = append(out, f)
		}
	}
	return out
}

// write saves the fixtures of agent into dir as <agent>-<n>.json.
func (rc *recorder) write(dir string) error {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("record: %w", err)
	}
	n := map[string]int{}
	seen := map[string]bool{}
	for _, f := range rc.fixtures {
		// The wrong-key run repeats claude's request; a retry repeats
		// its request; a probe of / is not an API call.
		key := f.Method + " " + f.Path + "\n" + canonical(f.Body)
		if f.Agent == wrongKeyAgent || seen[key] || !strings.HasPrefix(f.Path, "/v1/") || n[f.Agent] >= maxFixtures {
			continue
		}
		seen[key] = true
		n[f.Agent]++
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(f); err != nil {
			return fmt.Errorf("record: %w", err)
		}
		name := filepath.Join(dir, fmt.Sprintf("%s-%d.json", f.Agent, n[f.Agent]))
		if err := os.WriteFile(name, b.Bytes(), 0o644); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	return nil
}

func (rc *recorder) close() { _ = rc.srv.Close() }

func contextWith(r *http.Request, i int) context.Context {
	return context.WithValue(r.Context(), fixtureIndex{}, i)
}

// canonical is body with its objects' members in key order, so a retry
// that only reorders a map (Codex's client_metadata) is the same request.
func canonical(body string) string {
	var v any
	if json.Unmarshal([]byte(body), &v) != nil {
		return body
	}
	b, _ := json.Marshal(v)
	return string(b)
}
