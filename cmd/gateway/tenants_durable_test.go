package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// TestAPITenantsHealAfterPubSubCut: with every pub/sub client killed, a
// change made on A is seen on B within the 10 s resync, whether or not
// B's subscription came back before the change was announced.
func TestAPITenantsHealAfterPubSubCut(t *testing.T) {
	rs := redistest.Start(t)
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 2)
	a, b := bases[0], bases[1]
	mustAdmin(t, http.StatusCreated, a, "POST", "/admin/tenants", `{"id":"cut"}`)
	if err := rs.Client().Do(context.Background(), "CLIENT", "KILL", "TYPE", "pubsub").Err(); err != nil {
		t.Fatal(err)
	}
	key, _ := newKeyOn(t, a, "cut", "")
	within(t, 11*time.Second, "a change made during the pub/sub cut reaches B", func() bool { return chatCode(t, b, key, "healed") == 200 })
}

// TestAPITenantsWhileRedisIsDown: authentication goes on for every tenant
// and key known before; every change is 503 with a clear error.
func TestAPITenantsWhileRedisIsDown(t *testing.T) {
	rs := redistest.Start(t)
	if !rs.Stoppable() {
		t.Skip("needs a redis-server the test can stop")
	}
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 2)
	mustAdmin(t, http.StatusCreated, bases[0], "POST", "/admin/tenants", `{"id":"known"}`)
	key, keyID := newKeyOn(t, bases[0], "known", "")
	for _, base := range bases {
		within(t, time.Second, "key known everywhere", func() bool { return chatCode(t, base, key, "before") == 200 })
	}
	rs.Stop()
	for _, base := range bases {
		if code := chatCode(t, base, key, "during the outage"); code != 200 {
			t.Errorf("%s: API key during the outage: %d", base, code)
		}
		if code := chatCode(t, base, "sk-wired", "during the outage"); code != 200 {
			t.Errorf("%s: file key during the outage: %d", base, code)
		}
		for _, tt := range []struct{ method, path, body string }{
			{"POST", "/admin/tenants", `{"id":"new"}`},
			{"PATCH", "/admin/tenants/known", `{"requests_per_minute":5}`},
			{"POST", "/admin/tenants/known/keys", `{}`},
			{"DELETE", "/admin/tenants/known/keys/" + keyID, ``},
			{"DELETE", "/admin/tenants/known", ``},
		} {
			code, out := adminCall(t, base, tt.method, tt.path, tt.body)
			if code != http.StatusServiceUnavailable || errCode(out) != "tenant_store_unavailable" {
				t.Errorf("%s %s during the outage = %d %v; want 503 tenant_store_unavailable", tt.method, tt.path, code, out)
			}
		}
		list := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants", "")
		if n := len(list["tenants"].([]any)); n != 3 {
			t.Errorf("%s lists %d tenants during the outage; want 3", base, n)
		}
	}
	if code := chatCode(t, bases[1], key, "still"); code != 200 {
		t.Errorf("a refused revoke revoked the key: %d", code)
	}
}

// TestRedisRestartFromAOFKeepsTenants: Redis killed and restarted from its
// append-only file keeps every API tenant, key, revocation and audit
// event, and none of those keys has a TTL.
func TestRedisRestartFromAOFKeepsTenants(t *testing.T) {
	rs := redistest.StartAOF(t)
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 1)
	base := bases[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"durable","requests_per_minute":100}`)
	kept, _ := newKeyOn(t, base, "durable", `{"name":"kept"}`)
	revoked, revokedID := newKeyOn(t, base, "durable", `{"name":"revoked"}`)
	mustAdmin(t, http.StatusOK, base, "DELETE", "/admin/tenants/durable/keys/"+revokedID, "")
	events := mustAdmin(t, http.StatusOK, base, "GET", "/admin/audit?limit=100", "")["events"].([]any)

	rs.Stop()
	rs.Restart()
	ctx := context.Background()
	rdb := rs.Client()
	keys, err := rdb.Keys(ctx, "corral:v1:{admin}:*").Result()
	if err != nil || len(keys) < 3 {
		t.Fatalf("admin keys after the restart: %v, %v", keys, err)
	}
	for _, k := range keys {
		if ttl, _ := rdb.TTL(ctx, k).Result(); ttl != -1 {
			t.Errorf("TTL %s = %v; want -1", k, ttl)
		}
	}
	// A second gateway, started after the restart, knows all of it.
	fresh := redisGateways(t, []string{"CORRAL_REDIS_URL=" + rs.URL()}, mockllm.New(mockllm.Options{}), 1)[0]
	if code := chatCode(t, fresh, kept, "after restart"); code != 200 {
		t.Errorf("kept key after the restart: %d", code)
	}
	if code := chatCode(t, fresh, revoked, "after restart"); code != 401 {
		t.Errorf("revoked key after the restart: %d", code)
	}
	got := mustAdmin(t, http.StatusOK, fresh, "GET", "/admin/tenants/durable", "")
	if got["policy"].(map[string]any)["requests_per_minute"] != float64(100) || len(got["keys"].([]any)) != 1 {
		t.Errorf("tenant after the restart: %v", got)
	}
	after := mustAdmin(t, http.StatusOK, fresh, "GET", "/admin/audit?limit=100", "")["events"].([]any)
	if len(after) != len(events) || len(after) != 4 {
		t.Errorf("audit after the restart: %d events; %d before (want 4)", len(after), len(events))
	}
}

// TestEmbeddedRestartKeepsTenants: tenants and keys live in the data dir;
// a second gateway on the same dir is refused while the first runs.
func TestEmbeddedRestartKeepsTenants(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	env := []string{"CORRAL_UPSTREAM_URL=" + up.URL + "/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR=" + t.TempDir()}
	cfg, err := config.Load(env)
	if err != nil {
		t.Fatal(err)
	}
	first, err := newGateway(context.Background(), cfg, gatewayOptions{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	srv := serveGateway(t, first)
	mustAdmin(t, http.StatusCreated, srv.URL, "POST", "/admin/tenants", `{"id":"local"}`)
	key, _ := newKeyOn(t, srv.URL, "local", "")
	if _, err := newGateway(context.Background(), cfg, gatewayOptions{Logger: slog.New(slog.DiscardHandler)}); err == nil {
		t.Fatal("a second gateway on the same data dir started")
	}
	srv.Close()
	first.Close()
	second := serveGateway(t, mustGateway(t, env...))
	if code := chatCode(t, second.URL, key, "after restart"); code != 200 {
		t.Errorf("key after an embedded restart: %d", code)
	}
}

// TestOpenAISDKWithAPIKey: openai-go with a key made through the API gets
// a MISS then a HIT; with the key revoked, AuthenticationError after
// exactly one HTTP request (401 carries x-should-retry: false).
func TestOpenAISDKWithAPIKey(t *testing.T) {
	up := serveMock(t, mockllm.Options{})
	gw := serveGateway(t, mustGateway(t, "CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN=adm", "CORRAL_DATA_DIR="+t.TempDir()))
	mustAdmin(t, http.StatusCreated, gw.URL, "POST", "/admin/tenants", `{"id":"sdk"}`)
	key, keyID := newKeyOn(t, gw.URL, "sdk", `{"name":"sdk"}`)
	var requests atomic.Int32
	var mu sync.Mutex
	var cacheSeen []string
	client := officialopenai.NewClient(option.WithBaseURL(gw.URL+"/v1"), option.WithAPIKey(key),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			requests.Add(1)
			resp, err := next(r)
			if err == nil {
				mu.Lock()
				cacheSeen = append(cacheSeen, resp.Header.Get("X-Corral-Cache"))
				mu.Unlock()
			}
			return resp, err
		}))
	params := officialopenai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("sdk through an API key")},
	}
	ctx := context.Background()
	for range 2 {
		if _, err := client.Chat.Completions.New(ctx, params); err != nil {
			t.Fatal(err)
		}
	}
	if strings.Join(cacheSeen, ",") != "MISS,HIT" {
		t.Errorf("X-Corral-Cache = %v; want MISS then HIT", cacheSeen)
	}
	mustAdmin(t, http.StatusOK, gw.URL, "DELETE", "/admin/tenants/sdk/keys/"+keyID, "")
	requests.Store(0)
	_, err := client.Chat.Completions.New(ctx, params)
	var apiErr *officialopenai.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("revoked key: %v; want a 401 AuthenticationError", err)
	}
	if n := requests.Load(); n != 1 {
		t.Errorf("the SDK sent %d requests for a revoked key; want 1", n)
	}
}

// TestNoSecretsInAdminTrail: no key, key hash or admin token in any log
// line, audit event, admin answer (the creation's aside) or metric.
func TestNoSecretsInAdminTrail(t *testing.T) {
	var logs syncBuffer
	up := serveMock(t, mockllm.Options{})
	const token = "adm"
	gw := serveGateway(t, wireGateway(t, gatewayOptions{Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))},
		"CORRAL_UPSTREAM_URL="+up.URL+"/v1", "CORRAL_ADMIN_TOKEN="+token, "CORRAL_DATA_DIR="+t.TempDir()))
	base := gw.URL
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"secret"}`)
	key, keyID := newKeyOn(t, base, "secret", `{"name":"ci"}`)
	chatCode(t, base, key, "use it")
	mustAdmin(t, http.StatusOK, base, "PATCH", "/admin/tenants/secret", `{"requests_per_minute":9}`)
	mustAdmin(t, http.StatusOK, base, "DELETE", "/admin/tenants/secret/keys/"+keyID, "")
	chatCode(t, base, key, "revoked")
	adminCall(t, base, "POST", "/admin/tenants/secret/keys", `{"name":"`+key+`"}`) // a key pasted where it does not belong
	var answers bytes.Buffer
	for _, p := range []string{"/admin/audit?limit=100", "/admin/tenants", "/admin/tenants/secret", "/admin/tenants/secret/keys", "/metrics"} {
		req, _ := http.NewRequest("GET", base+p, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = answers.ReadFrom(resp.Body)
		resp.Body.Close()
	}
	if !strings.Contains(logs.String(), `"msg":"admin"`) || !strings.Contains(logs.String(), keyID) {
		t.Fatalf("no msg=admin line naming the key id in the logs:\n%s", logs.String())
	}
	secrets := map[string]string{"key": key, "key hash": tenant.HashKey(key), "key without prefix": strings.TrimPrefix(key, "sk-corral-")}
	for what, s := range secrets {
		if strings.Contains(logs.String(), s) {
			t.Errorf("the %s is in the logs", what)
		}
		if strings.Contains(answers.String(), s) {
			t.Errorf("the %s is in an admin answer or a metric", what)
		}
	}
	if strings.Contains(logs.String(), "Bearer "+token) || strings.Contains(logs.String(), `"`+token+`"`) {
		t.Error("the admin token is in the logs")
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a reader.
type syncBuffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestRedisRestartFromAOFKeepsSpend: priced calls by a budgeted tenant,
// then Redis killed and restarted from its append-only file: a gateway
// started after it reads the same budgets and usage days, and no spend or
// usage key has a TTL.
func TestRedisRestartFromAOFKeepsSpend(t *testing.T) {
	rs := redistest.StartAOF(t)
	env := []string{"CORRAL_REDIS_URL=" + rs.URL(), "CORRAL_PRICES_FILE=../../deploy/prices.yaml"}
	base := redisGateways(t, env, mockllm.New(mockllm.Options{}), 1)[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"payer","budget_usd_per_day":5,"budget_usd_per_month":50}`)
	key, _ := newKeyOn(t, base, "payer", "")
	for i := range 3 {
		if code := chatCode(t, base, key, fmt.Sprintf("priced call %d", i)); code != 200 {
			t.Fatalf("priced call %d: %d", i, code)
		}
	}
	day := time.Now().UTC().Format(time.DateOnly)
	usagePath := "/admin/usage?from=" + day + "&to=" + day
	// Usage counters reach Redis on the next flush (one pipeline).
	ctx := context.Background()
	rdb := rs.Client()
	within(t, 5*time.Second, "the usage counters reach Redis", func() bool {
		keys, _ := rdb.Keys(ctx, "corral:v1:usage:*").Result()
		return len(keys) >= 2
	})
	if n := upstreamCalls(mustAdmin(t, http.StatusOK, base, "GET", usagePath, "")); n != 3 {
		t.Fatalf("usage days count %v upstream calls; want 3", n)
	}
	u := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/payer/usage", "")
	budgets, _ := u["budgets"].([]any)
	days := mustAdmin(t, http.StatusOK, base, "GET", usagePath, "")
	if len(budgets) != 2 || budgets[0].(map[string]any)["spent_usd"] == float64(0) {
		t.Fatalf("budgets before the restart: %v; want two with spend", budgets)
	}

	rs.Stop()
	rs.Restart()
	rdb = rs.Client()
	for _, pattern := range []string{"corral:v1:spend:*", "corral:v1:usage:*"} {
		keys, err := rdb.Keys(ctx, pattern).Result()
		if err != nil || len(keys) == 0 {
			t.Fatalf("%s after the restart: %v, %v", pattern, keys, err)
		}
		for _, k := range keys {
			if ttl, _ := rdb.TTL(ctx, k).Result(); ttl != -1 {
				t.Errorf("TTL %s = %v; want -1", k, ttl)
			}
		}
	}
	fresh := redisGateways(t, env, mockllm.New(mockllm.Options{}), 1)[0]
	within(t, 11*time.Second, "the fresh gateway knows the tenant", func() bool {
		code, _ := adminCall(t, fresh, "GET", "/admin/tenants/payer", "")
		return code == http.StatusOK
	})
	after := mustAdmin(t, http.StatusOK, fresh, "GET", "/admin/tenants/payer/usage", "")["budgets"].([]any)
	for i := range budgets {
		b, a := budgets[i].(map[string]any), after[i].(map[string]any)
		if a["spent_usd"] != b["spent_usd"] || a["period"] != b["period"] {
			t.Errorf("budget after the restart: %v; before %v", a, b)
		}
	}
	if got := mustAdmin(t, http.StatusOK, fresh, "GET", usagePath, ""); !reflect.DeepEqual(got, days) {
		t.Errorf("usage days after the restart:\n%v\nbefore:\n%v", got, days)
	}
}

// upstreamCalls sums the upstream calls of a GET /admin/usage answer.
func upstreamCalls(out map[string]any) float64 {
	rows, _ := out["rows"].([]any)
	var n float64
	for _, r := range rows {
		v, _ := r.(map[string]any)["upstream_calls"].(float64)
		n += v
	}
	return n
}

// TestAPITenantsOnSentinel: the tenant store on a real Sentinel set (a
// master, a replica, three Sentinels). A tenant and key made before a
// failover (SENTINEL FAILOVER), once the replica has them (WAIT), are
// listed and authenticate after it, on a gateway started after it too
// (read from the promoted replica).
func TestAPITenantsOnSentinel(t *testing.T) {
	s := redistest.StartSentinel(t, 1)
	env := []string{"CORRAL_REDIS_URL=" + s.URL(), "CORRAL_REDIS_SENTINEL_MASTER=" + redistest.SentinelMaster}
	base := redisGateways(t, env, mockllm.New(mockllm.Options{}), 1)[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"sentinel"}`)
	key, _ := newKeyOn(t, base, "sentinel", `{"name":"before"}`)
	if code := chatCode(t, base, key, "before the failover"); code != 200 {
		t.Fatalf("key before the failover: %d", code)
	}
	// Replication is asynchronous: a failover keeps what the replica has.
	opt, err := redis.ParseClusterURL(s.URL())
	if err != nil {
		t.Fatal(err)
	}
	fc := redis.NewFailoverClient(&redis.FailoverOptions{MasterName: redistest.SentinelMaster, SentinelAddrs: opt.Addrs})
	defer fc.Close()
	if n, err := fc.Do(context.Background(), "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1: %d, %v", n, err)
	}

	s.Failover()
	fresh := redisGateways(t, env, mockllm.New(mockllm.Options{}), 1)[0]
	for _, b := range []string{base, fresh} {
		within(t, 11*time.Second, "the key answers on "+b, func() bool { return chatCode(t, b, key, "after the failover") == 200 })
		list := mustAdmin(t, http.StatusOK, b, "GET", "/admin/tenants/sentinel/keys", "")
		if keys, _ := list["keys"].([]any); len(keys) != 1 {
			t.Errorf("%s lists %v after the failover; want 1 key", b, list)
		}
	}
}
