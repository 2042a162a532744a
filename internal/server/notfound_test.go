package server

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/logtest"
)

// TestUnknownPathSaysWhichWasMeant: a path Corral does not serve (a base
// URL without /v1, another version, anything) is a 404 in the shape of
// the API the request names (anthropic-version or x-api-key: Anthropic's;
// else OpenAI's), naming the /v1 path meant when there is an obvious one
// and the base URL to set, never echoing a path it cannot show safely;
// and each has an access line at the default level.
func TestUnknownPathSaysWhichWasMeant(t *testing.T) {
	var logs logtest.Buffer
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) {
			so.Logger, so.AccessLine = accessline.New(&logs, slog.LevelInfo)
		}
	})
	host := strings.TrimPrefix(h.gw.URL, "http://")
	base := "Set the base URL to http://" + host + "/v1."
	hostile := "/x\u202e\"<script>" + strings.Repeat("a", 300)
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	anthropicErr := func(msg string) string {
		return `{"type":"error","error":{"type":"not_found_error","message":` + quote(msg) + `}}`
	}
	openaiErr := func(msg string) string {
		return `{"error":{"message":` + quote(msg) + `,"type":"invalid_request_error","param":null,"code":"not_found"}}`
	}
	tests := []struct {
		name, method, path string
		hdr                []string
		wantBody           string
	}{
		{"messages with anthropic-version", "POST", "/messages", []string{"Anthropic-Version", "2023-06-01", "X-Api-Key", acmeKey},
			anthropicErr("/messages is not a Corral path; did you mean /v1/messages? " + base)},
		{"messages with x-api-key only", "POST", "/messages", []string{"X-Api-Key", acmeKey},
			anthropicErr("/messages is not a Corral path; did you mean /v1/messages? " + base)},
		{"count_tokens", "POST", "/messages/count_tokens", []string{"Anthropic-Version", "2023-06-01"},
			anthropicErr("/messages/count_tokens is not a Corral path; did you mean /v1/messages/count_tokens? " + base)},
		{"chat completions", "POST", "/chat/completions", []string{"Authorization", "Bearer " + acmeKey},
			openaiErr("/chat/completions is not a Corral path; did you mean /v1/chat/completions? " + base)},
		{"responses", "POST", "/responses", []string{"Authorization", "Bearer " + acmeKey},
			openaiErr("/responses is not a Corral path; did you mean /v1/responses? " + base)},
		{"models", "GET", "/models/claude-sonnet-4-5", []string{"Anthropic-Version", "2023-06-01"},
			anthropicErr("/models/claude-sonnet-4-5 is not a Corral path; did you mean /v1/models/claude-sonnet-4-5? " + base)},
		{"another version", "GET", "/v2/x", nil,
			openaiErr("/v2/x is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: s" + base[1:])},
		{"another version named anthropic", "POST", "/v2/messages", []string{"Anthropic-Version", "2023-06-01"},
			anthropicErr("/v2/messages is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: s" + base[1:])},
		{"random path", "GET", "/9f2c41d7e0b3", nil,
			openaiErr("/9f2c41d7e0b3 is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: s" + base[1:])},
		{"path not shown", "POST", hostile + "/chat/completions", []string{"Authorization", "Bearer " + acmeKey},
			openaiErr("This is not a Corral path. Corral serves the OpenAI and Anthropic APIs under /v1: s" + base[1:])},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "req-" + strings.ReplaceAll(tt.name, " ", "-")
			req, err := http.NewRequestWithContext(context.Background(), tt.method, h.gw.URL+"/", strings.NewReader("{}"))
			if err != nil {
				t.Fatal(err)
			}
			req.URL.Path = tt.path
			req.Header.Set("X-Request-Id", id)
			for i := 0; i+1 < len(tt.hdr); i += 2 {
				req.Header.Set(tt.hdr[i], tt.hdr[i+1])
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || string(body) != tt.wantBody {
				t.Errorf("%s %.60q: %d %s\nwant 404 %s", tt.method, tt.path, resp.StatusCode, body, tt.wantBody)
			}
			if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
			if got := resp.Header.Get("X-Should-Retry"); got != "false" {
				t.Errorf("X-Should-Retry %q; want false", got)
			}
			// The line is written before the answer leaves (the access log
			// runs in the handler), so it is there now.
			var line string
			for _, l := range strings.Split(logs.String(), "\n") {
				if strings.Contains(l, `"request_id":"`+id+`"`) {
					line = l
				}
			}
			var got struct {
				Level, Msg, Method, Path, Code string
				Status                         int
			}
			if err := json.Unmarshal([]byte(line), &got); err != nil {
				t.Fatalf("no access line for %s (%v):\n%s", id, err, logs.String())
			}
			if got.Level != "INFO" || got.Msg != "request" || got.Method != tt.method || got.Path != tt.path || got.Status != 404 || got.Code != "not_found" {
				t.Errorf("access line %s", line)
			}
		})
	}
}

// TestProbesLoggedAtDebug: a load balancer's probes and a scraper's
// requests (GET /healthz, /readyz, /metrics) are logged at debug, so
// they do not flood the log at the default level; any other method on
// those paths is a request like any other.
func TestProbesLoggedAtDebug(t *testing.T) {
	var logs logtest.Buffer
	h := newHarness(t, func(o *harnessOptions) {
		o.server = func(so *Options) {
			so.Logger, so.AccessLine = accessline.New(&logs, slog.LevelInfo)
		}
	})
	for _, tt := range []struct {
		method, path string
		logged       bool
	}{
		{"GET", "/healthz", false},
		{"HEAD", "/readyz", false},
		{"POST", "/healthz", true},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), tt.method, h.gw.URL+tt.path, nil)
		req.Header.Set("X-Request-Id", "req-"+tt.method)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if got := strings.Contains(logs.String(), `"request_id":"req-`+tt.method+`"`); got != tt.logged {
			t.Errorf("%s %s (%d): logged %v; want %v", tt.method, tt.path, resp.StatusCode, got, tt.logged)
		}
	}
}
