package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/tenant"
)

// redisGateways wires n gateways, as separate processes would be, to one
// Redis setup (env: CORRAL_REDIS_URL and its topology) in front of one mock
// model. Tenants: acme (no limits) and rpm (20 requests/min).
func redisGateways(t *testing.T, env []string, mock *mockllm.Server, n int) []string {
	t.Helper()
	up := httptest.NewServer(mock)
	t.Cleanup(up.Close)
	file := writeTenantsFile(t,
		tenantYAML("acme", tenant.HashKey("sk-wired")),
		tenantYAML("rpm", tenant.HashKey("sk-rpm"), "requests_per_minute: 20"))
	env = append(env,
		"CORRAL_UPSTREAM_URL="+up.URL+"/v1",
		"CORRAL_TENANTS_FILE="+file,
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_DATA_DIR="+t.TempDir(),
	)
	var bases []string
	for range n {
		bases = append(bases, serveGateway(t, mustGateway(t, env...)).URL)
	}
	return bases
}

// steadyLoad keeps workers goroutines sending chat requests as sk-wired,
// worker w to bases[w%len(bases)] with prompt(w, i) for its i-th request,
// until stop is called. stop waits for the workers and returns every
// request that was not answered 200.
func steadyLoad(bases []string, workers int, prompt func(w, i int) string) (stop func() []string) {
	done := make(chan struct{})
	failed := make([][]string, workers) // failed[w] is worker w's alone
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				if code, _, err := postChat(bases[w%len(bases)], "sk-wired", prompt(w, i)); code != 200 || err != nil {
					failed[w] = append(failed[w], fmt.Sprintf("worker %d request %d: %d %v", w, i, code, err))
				}
			}
		})
	}
	return func() []string {
		close(done)
		wg.Wait()
		var all []string
		for _, f := range failed {
			all = append(all, f...)
		}
		return all
	}
}

// post sends one chat request; it is safe from any goroutine.
func postChat(base, key, text string) (int, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"`+text+`"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Corral-Cache"), err
}

// startBurst sends n requests at once, request i as send(i) does. The
// func it returns waits for every answer and returns their status codes,
// in request order.
func startBurst(n int, send func(i int) int) (codes func() []int) {
	out := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { out[i] = send(i) })
	}
	return func() []int {
		wg.Wait()
		return out
	}
}

// TestRedisCluster runs three gateways on a real local Redis Cluster (3
// masters, 3 replicas): a burst of identical prompts over all three makes
// one upstream call, requests/min holds exactly across them, and a purge
// reaches the entries on every master.
func TestRedisCluster(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	gate := make(chan struct{})
	mock := mockllm.New(mockllm.Options{OnRequest: func(r *http.Request) {
		select {
		case <-gate:
		case <-r.Context().Done():
		}
	}})
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + c.URL(), "CORRAL_REDIS_CLUSTER=true"}, mock, 3)

	t.Run("one upstream call per burst", func(t *testing.T) {
		const n = 30
		codes := startBurst(n, func(i int) int {
			code, _, _ := postChat(bases[i%3], "sk-wired", "burst")
			return code
		})
		// Hold the one upstream call until every request has arrived
		// somewhere: the leader's call is in flight, the rest wait on it.
		if _, err := mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
			t.Fatal(err)
		}
		close(gate)
		for i, code := range codes() {
			if code != 200 {
				t.Errorf("request %d: %d", i, code)
			}
		}
		if got := mock.Stats().Requests; got != 1 {
			t.Errorf("upstream calls = %d for a burst of %d over 3 instances; want 1", got, n)
		}
	})

	t.Run("live stream followers", func(t *testing.T) {
		before := mock.Stats().Requests
		body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"live"}],"mock":{"chunks":10,"chunk_delay_ms":40}}`
		const n = 9
		var wg sync.WaitGroup
		type result struct {
			code  int
			cache string
			body  string
		}
		got := make([]result, n)
		first := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				if i > 0 {
					<-first // join while the leader's stream is live
				}
				req, _ := http.NewRequest(http.MethodPost, bases[i%3]+"/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer sk-wired")
				resp, err := http.DefaultClient.Do(req)
				if i == 0 {
					close(first)
				}
				if err != nil {
					return
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				got[i] = result{resp.StatusCode, resp.Header.Get("X-Corral-Cache"), string(b)}
			})
		}
		wg.Wait()
		coalesced := 0
		for i, r := range got {
			if r.code != 200 || !strings.HasSuffix(strings.TrimSpace(r.body), "data: [DONE]") {
				t.Errorf("stream %d: %d %s, ends %q", i, r.code, r.cache, r.body[max(0, len(r.body)-40):])
			}
			if r.cache == "COALESCED" {
				coalesced++
			}
		}
		if calls := mock.Stats().Requests - before; calls != 1 || coalesced == 0 {
			t.Errorf("upstream calls = %d, live followers %d; want 1 call and followers on other instances", calls, coalesced)
		}
	})

	t.Run("exact requests per minute", func(t *testing.T) {
		const n = 45
		codes := startBurst(n, func(i int) int {
			code, _, _ := postChat(bases[i%3], "sk-rpm", fmt.Sprintf("rpm %d", i))
			return code
		})
		ok := 0
		for _, code := range codes() {
			if code == 200 {
				ok++
			}
		}
		if ok != 20 {
			t.Errorf("%d of %d requests admitted over 3 instances; want exactly the limit, 20", ok, n)
		}
	})

	t.Run("purge reaches every master", func(t *testing.T) {
		for i := range 24 { // distinct prompts: their keys spread over the slots
			if code, _, err := postChat(bases[i%3], "sk-wired", fmt.Sprintf("purge %d", i)); code != 200 || err != nil {
				t.Fatalf("storing %d: %d %v", i, code, err)
			}
		}
		cc := c.Client()
		perMaster := func() map[string]int {
			var mu sync.Mutex
			out := map[string]int{}
			err := cc.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
				keys, err := m.Keys(ctx, "corral:v1:{acme:*}:r").Result()
				mu.Lock()
				out[m.Options().Addr] = len(keys)
				mu.Unlock()
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		before := perMaster()
		holding := 0
		for _, n := range before {
			if n > 0 {
				holding++
			}
		}
		if holding < 2 {
			t.Fatalf("entries per master %v; want them on several masters", before)
		}
		req, _ := http.NewRequest(http.MethodDelete, bases[1]+"/admin/cache/acme", nil)
		req.Header.Set("Authorization", "Bearer adm")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("purge = %d", resp.StatusCode)
		}
		for addr, n := range perMaster() {
			if n != 0 {
				t.Errorf("master %s still holds %d entries after the purge (before: %v)", addr, n, before)
			}
		}
		if _, cache, _ := postChat(bases[2], "sk-wired", "purge 0"); cache != "MISS" {
			t.Errorf("after the purge: %s; want MISS", cache)
		}
	})
}

// TestRedisSentinel runs two gateways on a real Sentinel set (a master, a
// replica, three Sentinels): answers are shared through the master, a
// failover (a replica promoted) under steady traffic fails no request, and
// entries are stored and shared again on the new master.
func TestRedisSentinel(t *testing.T) {
	s := redistest.StartSentinel(t, 1)
	mock := mockllm.New(mockllm.Options{})
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + s.URL(), "CORRAL_REDIS_SENTINEL_MASTER=" + redistest.SentinelMaster}, mock, 2)
	shared := func(text string) {
		t.Helper()
		if code, cache, err := postChat(bases[0], "sk-wired", text); code != 200 || cache != "MISS" || err != nil {
			t.Fatalf("%s on the first instance: %d %s %v; want a MISS", text, code, cache, err)
		}
		if code, cache, err := postChat(bases[1], "sk-wired", text); code != 200 || cache != "HIT" || err != nil {
			t.Fatalf("%s on the second instance: %d %s %v; want a HIT", text, code, cache, err)
		}
	}
	shared("before the failover")

	stop := steadyLoad(bases, 4, func(w, i int) string { return fmt.Sprintf("load %d %d", w, i%20) })
	s.Failover()
	for _, f := range stop() {
		t.Error(f)
	}
	// The new master takes writes: entries are shared again within seconds.
	deadline := time.Now().Add(15 * time.Second)
	for i := 0; ; i++ {
		text := fmt.Sprintf("after the failover %d", i)
		_, cache0, _ := postChat(bases[0], "sk-wired", text)
		_, cache1, _ := postChat(bases[1], "sk-wired", text)
		if cache0 == "MISS" && cache1 == "HIT" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer shared through Redis 15 s after the failover (last: %s, %s)", cache0, cache1)
		}
	}
}

// TestRedisClusterMasterKilled kills a Cluster master under steady traffic
// over three gateways: no request fails (Redis faults degrade to the
// in-process path), and once its replica is promoted answers are stored
// and shared through the Cluster again.
func TestRedisClusterMasterKilled(t *testing.T) {
	c := redistest.StartCluster(t, 3, 1)
	mock := mockllm.New(mockllm.Options{})
	bases := redisGateways(t, []string{"CORRAL_REDIS_URL=" + c.URL(), "CORRAL_REDIS_CLUSTER=true"}, mock, 3)
	// 30 prompts spread over the slots, so some live on the killed master.
	stop := steadyLoad(bases, 6, func(w, i int) string { return fmt.Sprintf("load %d", (w*7+i)%30) })
	dead := c.KillMaster()
	c.WaitHealed(dead)
	for _, f := range stop() {
		t.Error(f)
	}
	// Every prompt is stored and shared again: a MISS on one instance is a
	// HIT on another, for prompts in every slot range.
	deadline := time.Now().Add(15 * time.Second)
	for shared, attempt := 0, 0; shared < 12; attempt++ {
		text := fmt.Sprintf("after the failover %d", attempt)
		_, cache0, _ := postChat(bases[attempt%3], "sk-wired", text)
		_, cache1, _ := postChat(bases[(attempt+1)%3], "sk-wired", text)
		if cache0 == "MISS" && cache1 == "HIT" {
			shared++
			continue
		}
		shared = 0 // twelve in a row, so every slot range is back
		if time.Now().After(deadline) {
			t.Fatalf("answers not shared through the Cluster 15 s after the failover (%s, %s)", cache0, cache1)
		}
	}
}
