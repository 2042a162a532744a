package main

import (
	"bufio"
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/wire/anthropic"
	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/responses"
)

// sseStream is one streaming request's events, read as they come.
type sseStream struct {
	first  chan struct{} // closed at the first event
	events chan []string // every event, once the stream has ended
}

// openStream posts a streaming request and reads its SSE events.
func openStream(t *testing.T, base, path, body string, hdr ...string) *sseStream {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sk-stop")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("%s: status %d", path, resp.StatusCode)
	}
	s := &sseStream{first: make(chan struct{}), events: make(chan []string, 1)}
	go func() {
		defer resp.Body.Close()
		var events []string
		var ev strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			if sc.Text() != "" {
				ev.WriteString(sc.Text() + "\n")
				continue
			}
			if ev.Len() > 0 {
				if events = append(events, ev.String()); len(events) == 1 {
					close(s.first)
				}
				ev.Reset()
			}
		}
		if len(events) == 0 {
			close(s.first)
		}
		s.events <- events
	}()
	return s
}

// TestShutdownEndsStreams shuts a gateway down (in-process run, real
// redis-server, CORRAL_SHUTDOWN_TIMEOUT=2s) while it relays streams of every
// kind that outlast the grace period: a leader's, a local follower's, a
// mirror of another instance's live stream, a bypass, a Responses and a Messages
// stream. Each ends with its API's error event, the lock and live stream
// keys the instance held are gone from Redis when run returns, the other
// instance's follower of its stream ends with an error event too, and run
// returns within the timeout.
func TestShutdownEndsStreams(t *testing.T) {
	const grace = 2 * time.Second
	rs := redistest.Start(t)
	up := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-stop")))
	env := []string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + up.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_SHUTDOWN_TIMEOUT=" + grace.String(),
		// The mock answers both APIs: one upstream for each.
		"CORRAL_UPSTREAMS_FILE=" + writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
			"  - {name: mock, url: "+up.URL+"/v1}\n"+
			"  - {name: claude, api: anthropic, url: "+up.URL+"/v1}\n"),
	}

	// Instance B keeps running; it leads one stream and follows another.
	gwB := wireGateway(t, gatewayOptions{}, append(env, "CORRAL_DATA_DIR="+t.TempDir())...)
	srvB := serveGateway(t, gwB)
	defer gwB.srv.Stop() // its own stream outlasts the test; the server and gateway close after

	// Instance A is the one shut down, through run.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stderr := newLineWriter()
	ran := make(chan error, 1)
	go func() {
		ran <- run(ctx, nil, append(env, "CORRAL_ADDR=127.0.0.1:0", "CORRAL_DATA_DIR="+t.TempDir()), newLineWriter(), stderr)
	}()
	a := "http://" + stderr.waitFor(t, regexp.MustCompile(`"msg":"corral listening","addr":"([^"]+)"`))[1]
	b := srvB.URL

	// Every upstream stream sends its first event, then waits a minute
	// before its next: all of them are open when the grace period ends.
	long := `"mock":{"chunks":2,"chunk_delay_ms":60000}`
	chat := func(text string) string {
		return `{"model":"gpt-4o-mini","stream":true,` + long + `,"messages":[{"role":"user","content":"` + text + `"}]}`
	}
	led, mirrored := chat("led by the instance that stops"), chat("led by the instance that stays")
	resp := `{"model":"gpt-4o-mini","stream":true,` + long + `,"input":"a Responses stream"}`
	msgs := `{"model":"claude-sonnet-4-5","max_tokens":64,"stream":true,` + long + `,"messages":[{"role":"user","content":"a Messages stream"}]}`

	leader := openStream(t, a, "/v1/chat/completions", led)
	<-leader.first
	follower := openStream(t, a, "/v1/chat/completions", led)
	elsewhere := openStream(t, b, "/v1/chat/completions", led) // follows A's live stream from B
	bLeader := openStream(t, b, "/v1/chat/completions", mirrored)
	<-bLeader.first
	mirror := openStream(t, a, "/v1/chat/completions", mirrored)
	bypass := openStream(t, a, "/v1/chat/completions", chat("never cached"), "Cache-Control", "no-store")
	respStream := openStream(t, a, "/v1/responses", resp)
	msgStream := openStream(t, a, "/v1/messages", msgs, "anthropic-version", "2023-06-01")
	for _, s := range []*sseStream{follower, elsewhere, mirror, bypass, respStream, msgStream} {
		<-s.first
	}

	start := time.Now()
	cancel() // SIGTERM
	if err := <-ran; err != nil {
		t.Errorf("run = %v; want nil", err)
	}
	if took := time.Since(start); took > grace+time.Second {
		t.Errorf("shutdown took %v; want at most the %v timeout (and a second's margin)", took, grace)
	}

	// What A held in Redis is gone the moment run returns.
	rdb := rs.Client()
	bg := context.Background()
	chatFacts, err := openai.Format{}.Parse("acme", "/chat/completions", []byte(led))
	if err != nil {
		t.Fatal(err)
	}
	respFacts, err := responses.Format{}.Parse("acme", "/responses", []byte(resp))
	if err != nil {
		t.Fatal(err)
	}
	msgFacts, err := anthropic.Format{}.Parse("acme", "/messages", []byte(msgs))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{chatFacts.Hash, respFacts.Hash, msgFacts.Hash} {
		for _, k := range []keying.Kind{keying.Lock, keying.Stream} {
			name := keying.Name("acme", h, k)
			if n, _ := rdb.Exists(bg, name).Result(); n != 0 {
				t.Errorf("%s is still in Redis after the shutdown", name)
			}
		}
	}

	chatError := regexp.MustCompile(`^data: \{"error":\{.*"code":"gateway_shutting_down"`)
	tests := []struct {
		name string
		s    *sseStream
		want *regexp.Regexp
	}{
		{"leader", leader, chatError},
		{"local follower", follower, chatError},
		{"mirror of another instance", mirror, chatError},
		{"bypass", bypass, chatError},
		{"responses", respStream, regexp.MustCompile(`^event: error\ndata: \{"type":"error","code":"gateway_shutting_down"`)},
		{"messages", msgStream, regexp.MustCompile(`^event: error\ndata: \{"type":"error","error":\{"type":"api_error","message":"[^"]+"\}\}\n$`)},
		// B's follower of A's stream learns of the shutdown from A's end
		// marker, and is told to retry as A's own clients are.
		{"follower on the other instance", elsewhere, chatError},
	}
	for _, tt := range tests {
		events := <-tt.s.events
		last := ""
		if len(events) > 0 {
			last = events[len(events)-1]
		}
		if !tt.want.MatchString(last) || strings.Contains(strings.Join(events, ""), "[DONE]") {
			t.Errorf("%s: last event %q; want one matching %s and no [DONE]", tt.name, last, tt.want)
		}
	}
	if n, _ := rdb.Exists(bg, keying.Name("acme", mustHash(t, mirrored), keying.Lock)).Result(); n != 1 {
		t.Error("the other instance's lock is gone; only the stopping instance's may go")
	}
}

func mustHash(t *testing.T, body string) string {
	t.Helper()
	f, err := openai.Format{}.Parse("acme", "/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return f.Hash
}
