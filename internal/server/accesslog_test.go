package server

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/logtest"
)

// accessLines runs one sequence of requests (a miss, its hit, a stream, a
// refused key, an upstream failure, a cut stream, a bad body, probes) on
// a gateway whose logger is the gateway's own at level, with or without
// its access-line encoder, and returns the access lines with what differs
// from run to run (time, latencies, ports) blanked.
func accessLines(t *testing.T, level slog.Level, encoder bool) []string {
	t.Helper()
	var logs logtest.Buffer
	h := newHarness(t, withAdmin, func(o *harnessOptions) {
		o.server = func(so *Options) {
			log, enc := accessline.New(&logs, level)
			so.Logger = log
			if encoder {
				so.AccessLine = enc
			}
		}
	})
	ctx := context.Background()
	id := func(s string) []string { return []string{"X-Request-Id", "req-" + s} }
	send(ctx, h.gw.URL, acmeKey, chatBody("log me <twice> & again"), id("miss")...)
	send(ctx, h.gw.URL, acmeKey, chatBody("log me <twice> & again"), id("hit")...)
	send(ctx, h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"streamed"}]}`, id("stream")...)
	send(ctx, h.gw.URL, "sk-wrong-tenant-key-123", chatBody("refused"), id("refused")...)
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-401","messages":[{"role":"user","content":"x"}]}`, id("upstream-401")...)
	send(ctx, h.gw.URL, acmeKey, `{"model":"mock-cut","stream":true,"messages":[{"role":"user","content":"x"}]}`, id("cut")...)
	send(ctx, h.gw.URL, acmeKey, `{"model": broken`, id("bad\u2028body\x01")...)
	get := func(path, token, id string) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.gw.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Request-Id", id)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	get("/healthz", "", "req-probe")
	get("/readyz", "", "req-probe")
	get("/admin/usage/acme", adminToken, "req-admin")
	get("/admin/usage/acme", "wrong-admin-token", "req-admin-refused")
	get("/v1/models", acmeKey, "req-models")
	get("/v1/files/file-nobody", acmeKey, "req-proxy")

	// Whether a stream's line carries upstream_ms varies from run to run
	// (seen under -race on a loaded machine), so it goes, key and all; the
	// encoder's own tests cover it present and absent.
	varying := regexp.MustCompile(`"time":"[^"]*"|"latency_ms":[0-9.e+-]+|127\.0\.0\.1:[0-9]+`)
	upstreamMS := regexp.MustCompile(`,"upstream_ms":[0-9.e+-]+`)
	var lines []string
	for _, l := range strings.SplitAfter(logs.String(), "\n") {
		if strings.Contains(l, `"msg":"request"`) {
			lines = append(lines, upstreamMS.ReplaceAllString(varying.ReplaceAllString(l, "…"), ""))
		}
	}
	return lines
}

// TestAccessLogEncoderMatchesSlog checks that a server handed the
// gateway's access-line encoder logs the same access lines as the same
// logger's slog handler, at debug (probes included) and at info (probes
// left out, as before).
func TestAccessLogEncoderMatchesSlog(t *testing.T) {
	for _, tt := range []struct {
		level  slog.Level
		probes bool
	}{{slog.LevelDebug, true}, {slog.LevelInfo, false}} {
		viaSlog := accessLines(t, tt.level, false)
		viaEncoder := accessLines(t, tt.level, true)
		if strings.Join(viaEncoder, "") != strings.Join(viaSlog, "") {
			t.Fatalf("at %v the access lines differ:\nslog:\n%s\nencoder:\n%s", tt.level, strings.Join(viaSlog, ""), strings.Join(viaEncoder, ""))
		}
		all := strings.Join(viaEncoder, "")
		for _, want := range []string{`"request_id":"req-hit"`, `"cache":"HIT"`, `"request_id":"req-upstream-401"`, `"request_id":"req-cut"`, `"request_id":"req-admin"`, `"request_id":"req-proxy"`} {
			if !strings.Contains(all, want) {
				t.Errorf("at %v no access line has %s:\n%s", tt.level, want, all)
			}
		}
		if got := strings.Contains(all, `"path":"/healthz"`); got != tt.probes {
			t.Errorf("at %v a /healthz line logged = %v, want %v:\n%s", tt.level, got, tt.probes, all)
		}
	}
}

// TestRefusalAccessLinesNameTheirCode: the access line of every answer
// Corral writes itself names its error code (a refused key, an unknown
// object, the 502 for an upstream's refusal of Corral's credential, the
// error event of a cut stream), and an upstream's answer names none.
func TestRefusalAccessLinesNameTheirCode(t *testing.T) {
	lines := accessLines(t, slog.LevelInfo, true)
	tests := []struct {
		give string // request id
		want string // the line's code field, "" for none
	}{
		{"req-refused", `"code":"invalid_api_key"`},
		{"req-proxy", `"code":"not_found"`},
		{"req-cut", `"code":"upstream_error"`},
		{"req-upstream-401", `"code":"upstream_auth_error"`},
		{"req-miss", ""},
		{"req-hit", ""},
	}
	for _, tt := range tests {
		i := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, `"request_id":"`+tt.give+`"`) })
		if i < 0 {
			t.Errorf("no access line for %s:\n%s", tt.give, strings.Join(lines, ""))
			continue
		}
		if tt.want == "" {
			if strings.Contains(lines[i], `"code":`) {
				t.Errorf("%s: an answer names a code: %s", tt.give, lines[i])
			}
		} else if !strings.Contains(lines[i], tt.want) {
			t.Errorf("%s: want %s in %s", tt.give, tt.want, lines[i])
		}
	}
}
