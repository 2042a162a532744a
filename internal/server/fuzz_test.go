package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// panicFlag is a log sink that remembers whether the recoverer logged a
// panic: the recoverer turns one into a 500, which alone could also be an
// upstream's.
type panicFlag struct{ seen atomic.Bool }

func (p *panicFlag) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"panic serving request"`)) {
		p.seen.Store(true)
	}
	return len(b), nil
}

// fuzzRoutes are the paths a fuzzed body is sent to: the three cached
// endpoints, and proxied ones with a JSON and a form body.
var fuzzRoutes = []struct{ path, contentType string }{
	{"/v1/chat/completions", "application/json"},
	{"/v1/completions", "application/json"},
	{"/v1/embeddings", "application/json"},
	{"/v1/responses", "application/json"},
	{"/v1/moderations", "text/plain"},
	{"/v1/audio/transcriptions", "multipart/form-data; boundary=b"},
	{"/v1/audio/speech", "application/x-www-form-urlencoded"},
	{"/v1/chat/completions", ""},
}

// fuzzAllocSlack is the most a request may allocate beyond a small
// multiple of its body: every answer here is small, so more is a blow-up.
const fuzzAllocSlack = 64 << 20

// FuzzHandler sends whole request bodies through the gateway's HTTP
// handler over real HTTP, embedded mode, with the mock model upstream: to
// every cached endpoint and to proxied ones, as a tenant with and without a
// model allow-list, with a fuzzed Cache-Control. Whatever the body, the
// gateway must answer within bounded time, never panic, answer its own
// errors in OpenAI's shape, and allocate in proportion to the body.
// `make test` runs it for a few seconds; its seeds run in every go test.
func FuzzHandler(f *testing.F) {
	// Seeds: route (see fuzzRoutes; +8 = the allow-listed tenant) and body.
	seeds := []struct {
		route uint8
		body  string
	}{
		{0, chatBody("hello")},
		{0, `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`},
		{1, `{"model":"gpt-4o-mini","prompt":"once","max_tokens":5,"n":2}`},
		{2, `{"model":"text-embedding-3-small","input":["a","b"]}`},
		{0, `{"model":"mock-404","messages":[]}`},
		{0, `{"model":"mock-cut","stream":true,"messages":[]}`},
		{0, `{"model":"mock-500","messages":[],"mock":{"latency_ms":5000}}`},
		{8, `{"model":"gpt-4o-mini","MODEL":"gpt-4o","messages":[]}`},
		{11, ` {"model":"o1-pro","input":"x"}`},
		{3, `{"model":"gpt-4o-mini","input":"x"}`},
		{12, ` {"MODEL":"o1-pro","input":"x"}`},
		{0, `{"model":"gpt-4o-mini","seed":1e99999999999999999999999999,"messages":[]}`},
		{0, `{"model":"gpt-4o-mini","seed":123456789012345678901234567890e-30,"messages":[]}`},
		{0, `{"model":"gpt-4o-mini","messages":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`},
		{13, "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b--\r\n"},
		{14, "model=tts-1&input=hi"},
		{15, "\xef\xbb\xbf{\"model\":\"gpt-4o-mini\"}"},
		{0, `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"\ud800"}],"max_tokens":1e3}`},
	}
	for _, s := range seeds {
		f.Add(s.route, "", []byte(s.body))
	}
	f.Add(uint8(0), "no-cache", []byte(chatBody("again")))
	f.Add(uint8(8), "max-age=0, no-store", []byte(chatBody("x")))

	var logs panicFlag
	h := newHarness(f, func(o *harnessOptions) {
		o.upstreamTimeout = 300 * time.Millisecond // slow mock answers time out quickly: more inputs per second
		o.maxBody = 1 << 20
		o.logs = &logs
		o.mock.SlowLatency = time.Second
		o.server = func(so *Options) { so.WaitTimeout, so.LeaderWait = 2*time.Second, 2*time.Second }
	})
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	f.Cleanup(client.CloseIdleConnections)

	f.Fuzz(func(t *testing.T, route uint8, cacheControl string, body []byte) {
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		key := acmeKey
		if route&8 != 0 {
			key = limitedKey
		}
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.gw.URL+rt.path, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+key)
		if rt.contentType != "" {
			req.Header.Set("Content-Type", rt.contentType)
		}
		if cacheControl != "" && !strings.ContainsAny(cacheControl, "\r\n\x00") {
			req.Header.Set("Cache-Control", cacheControl)
		}

		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			if strings.Contains(err.Error(), "invalid header field") {
				return // the client refused the header, nothing reached the gateway
			}
			t.Fatalf("%s: no answer after %v: %v", rt.path, time.Since(start), err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		if err != nil && resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("%s: %d answer cut after %v: %v", rt.path, resp.StatusCode, time.Since(start), err)
		}
		if logs.seen.Swap(false) {
			t.Fatalf("%s: the handler panicked on %q", rt.path, body)
		}
		if n := after.TotalAlloc - before.TotalAlloc; n > uint64(fuzzAllocSlack+64*len(body)) {
			t.Errorf("%s: one request allocated %d bytes for a %d-byte body", rt.path, n, len(body))
		}
		if resp.StatusCode >= 400 && resp.StatusCode != 499 {
			var e struct {
				Error *struct {
					Message string `json:"message"`
					Type    string `json:"type"`
				} `json:"error"`
			}
			if json.Unmarshal(got, &e) != nil || e.Error == nil || e.Error.Message == "" || e.Error.Type == "" {
				t.Errorf("%s: %d answer is not an OpenAI error: %q", rt.path, resp.StatusCode, got)
			}
			if resp.StatusCode == 500 && bytes.Contains(got, []byte(`"internal_error"`)) {
				t.Errorf("%s: internal error for %q", rt.path, body)
			}
		}
	})
}
