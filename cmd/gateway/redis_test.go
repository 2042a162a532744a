package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/corralhq/corral/internal/logtest"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// wiredGateway is newGateway in distributed mode on rs, in front of the
// mock model, served over real HTTP; env adds CORRAL_* settings.
func wiredGateway(t *testing.T, rs *redistest.Server, log *slog.Logger, env ...string) *httptest.Server {
	t.Helper()
	mock := serveMock(t, mockllm.Options{})
	file := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-wired")))
	return serveGateway(t, wireGateway(t, gatewayOptions{Logger: log}, append([]string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + mock.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
	}, env...)...))
}

// readyRedis returns the "redis" detail of /readyz.
func readyRedis(t *testing.T, base string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/readyz", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("/readyz: %v", err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	s, _ := v["redis"].(string)
	return s
}

// TestHungRedis holds fault 4 of issue 13: a Redis stopped with SIGSTOP
// still completes TCP handshakes and then answers nothing, so a call
// without a deadline (a new connection's HELLO among them) hangs until
// Redis resumes. Every request must still be answered in bounded time, by
// the in-process path, /readyz must stop saying ok, and Corral must go back
// to Redis when it resumes.
func TestHungRedis(t *testing.T) {
	rs := redistest.Start(t)
	srv := wiredGateway(t, rs, slog.New(slog.DiscardHandler), "CORRAL_WAIT_TIMEOUT=20s")
	chat := func(text string) (int, time.Duration, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+text+`"}]}`))
		req.Header.Set("Authorization", "Bearer sk-wired")
		start := time.Now()
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, time.Since(start), err
		}
		defer resp.Body.Close()
		_, err = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode, time.Since(start), err
	}
	if code, _, err := chat("before"); code != 200 || err != nil {
		t.Fatalf("before the hang: %d %v", code, err)
	}
	if got := readyRedis(t, srv.URL); got != "ok" {
		t.Fatalf("/readyz redis = %q before the hang; want ok", got)
	}

	rs.Pause()
	// More concurrent requests than idle connections, so some dial anew
	// and handshake with the hung server.
	const n = 24
	var wg sync.WaitGroup
	errs := make(chan string, n)
	for i := range n {
		wg.Go(func() {
			code, took, err := chat(fmt.Sprintf("during the hang %d", i))
			if code != 200 || err != nil || took > 10*time.Second {
				errs <- fmt.Sprintf("request %d: %d after %v (%v)", i, code, took, err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
	if got := readyRedis(t, srv.URL); got == "ok" {
		t.Errorf("/readyz redis = %q while Redis hangs; want it not ok", got)
	}
	// Once tripped, requests skip Redis and answer fast; one per backoff
	// (1 s) probes Redis, and a failed probe must not keep its request
	// probing. Two and a half seconds of requests include probes.
	for i, start := 0, time.Now(); time.Since(start) < 2500*time.Millisecond; i++ {
		if code, took, err := chat(fmt.Sprintf("after the trip %d", i)); code != 200 || err != nil || took > 3*time.Second {
			t.Fatalf("after the breaker tripped: %d after %v (%v)", code, took, err)
		}
	}

	// Back: traffic probes Redis (once per backoff) and finds it.
	rs.Resume()
	pace := time.NewTicker(20 * time.Millisecond)
	defer pace.Stop()
	deadline := time.After(10 * time.Second)
	for i := 0; readyRedis(t, srv.URL) != "ok"; i++ {
		if code, _, err := chat(fmt.Sprintf("after the hang %d", i)); code != 200 || err != nil {
			t.Fatalf("after Redis resumed: %d (%v)", code, err)
		}
		select {
		case <-deadline:
			t.Fatal("/readyz does not say ok 10 s after Redis resumed")
		case <-pace.C:
		}
	}
}

// TestRedisClientDeadlines pins the client options that give every Redis
// call, and a new connection's handshake, a deadline.
func TestRedisClientDeadlines(t *testing.T) {
	c, err := newRedis(context.Background(), "redis://127.0.0.1:1/0", redisTopology{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	o := c.(*redis.Client).Options()
	if o.DialTimeout != redisDialTimeout || o.ReadTimeout != redisIOTimeout || o.WriteTimeout != redisIOTimeout ||
		o.PoolTimeout != redisPoolTimeout || !o.ContextTimeoutEnabled {
		t.Errorf("dial %v read %v write %v pool %v context %v; want %v, %v, %v, %v, true",
			o.DialTimeout, o.ReadTimeout, o.WriteTimeout, o.PoolTimeout, o.ContextTimeoutEnabled,
			redisDialTimeout, redisIOTimeout, redisIOTimeout, redisPoolTimeout)
	}
	if o.MaintNotificationsConfig == nil || o.MaintNotificationsConfig.Mode != maintnotifications.ModeDisabled {
		t.Errorf("maintenance notifications %+v; want disabled (they relax deadlines)", o.MaintNotificationsConfig)
	}
}

// TestRedisClientLogsAsJSON: go-redis's own log lines reach Corral's JSON
// log, not stderr in another format (issue 13, fault 8).
func TestRedisClientLogsAsJSON(t *testing.T) {
	rs := redistest.Start(t)
	var buf logtest.Buffer
	wiredGateway(t, rs, slog.New(slog.NewJSONHandler(&buf, nil)))
	// go-redis logs a truncated sub-millisecond expiry.
	if err := rs.Client().Set(context.Background(), "corral-test", "v", time.Microsecond).Err(); err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(buf.String()) {
		var v map[string]any
		if json.Unmarshal([]byte(line), &v) == nil && v["msg"] == "redis client" && strings.Contains(fmt.Sprint(v["detail"]), "truncating to 1ms") {
			return
		}
	}
	t.Errorf("no JSON line for go-redis's log in %q", buf.String())
}
