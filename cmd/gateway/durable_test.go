package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
)

func readyWarning(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var d map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Errorf("/readyz = %d; want ready with a warning", resp.StatusCode)
	}
	w, _ := d["warning"].(string)
	return w
}

// TestRedisWithoutPersistenceWarns: a Redis with neither AOF nor RDB save
// points is a warning at start, in the log and in /readyz (still ready).
func TestRedisWithoutPersistenceWarns(t *testing.T) {
	rs := redistest.Start(t) // --save "" --appendonly no
	var logs syncBuffer
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, wireGateway(t, gatewayOptions{Logger: slog.New(slog.NewJSONHandler(&logs, nil))},
		"CORRAL_REDIS_URL="+rs.URL(), "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_DATA_DIR="+t.TempDir()))
	within(t, 5*time.Second, "a durability warning in /readyz", func() bool { return strings.Contains(readyWarning(t, gw.URL), "persists nothing") })
	if !strings.Contains(logs.String(), "redis durable state at risk") {
		t.Errorf("no warning line:\n%s", logs.String())
	}
}

// TestRedisDurabilityCheck: AOF on is no warning; an allkeys-* policy is,
// and naming it; a refused CONFIG GET is one info line and no warning.
func TestRedisDurabilityCheck(t *testing.T) {
	rs := redistest.StartAOF(t)
	rdb := rs.Client()
	var logs syncBuffer
	d := &durability{rdb: rdb, log: slog.New(slog.NewJSONHandler(&logs, nil))}
	ctx := context.Background()
	d.check(ctx)
	if w := d.Warning(); w != "" {
		t.Errorf("AOF on: warning %q", w)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "allkeys-lru").Err(); err != nil {
		t.Fatal(err)
	}
	d.check(ctx)
	if w := d.Warning(); !strings.Contains(w, "allkeys-lru") {
		t.Errorf("allkeys-lru: warning %q", w)
	}
	if err := rdb.ConfigSet(ctx, "maxmemory-policy", "volatile-lru").Err(); err != nil {
		t.Fatal(err)
	}
	d.check(ctx)
	if w := d.Warning(); w != "" {
		t.Errorf("back to volatile-lru: warning %q", w)
	}
	// A managed Redis that refuses CONFIG: a user without it.
	if err := rdb.Do(ctx, "ACL", "SETUSER", "app", "on", ">pw", "~*", "&*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	opt := *rdb.Options()
	opt.Username, opt.Password = "app", "pw"
	app := redis.NewClient(&opt)
	t.Cleanup(func() { _ = app.Close() })
	d2 := &durability{rdb: app, log: slog.New(slog.NewJSONHandler(&logs, nil))}
	d2.check(ctx)
	d2.check(ctx)
	if w := d2.Warning(); w != "" {
		t.Errorf("CONFIG refused: warning %q", w)
	}
	if n := strings.Count(logs.String(), "durability not checked"); n != 1 {
		t.Errorf("%d info lines for a refused CONFIG GET; want 1", n)
	}
}
