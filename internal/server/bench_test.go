package server

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
)

// benchClient keeps enough idle connections for parallel benchmarks.
var benchClient = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}

func benchPost(b *testing.B, url, body string, hdr ...string) {
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+acmeKey)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := benchClient.Do(req)
	if err != nil {
		b.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		b.Fatalf("status %d", resp.StatusCode)
	}
}

// BenchmarkPassthrough is the upstream path (Cache-Control: no-store) in
// front of the mock model with 0 ms latency, against the mock directly.
func BenchmarkPassthrough(b *testing.B) {
	h := newHarness(b)
	body := chatBody("passthrough benchmark")
	b.Cleanup(benchClient.CloseIdleConnections)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchPost(b, h.up.URL, body)
		}
	})
	b.Run("corral", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			benchPost(b, h.gw.URL, body, "Cache-Control", "no-store")
		}
	})
}

// BenchmarkHit is a cache hit end to end, memory and Redis.
func BenchmarkHit(b *testing.B) {
	b.Cleanup(benchClient.CloseIdleConnections)
	body := chatBody("hit benchmark")
	b.Run("memory", func(b *testing.B) {
		h := newHarness(b)
		benchPost(b, h.gw.URL, body)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			benchPost(b, h.gw.URL, body)
		}
	})
	b.Run("redis", func(b *testing.B) {
		h, _ := distributed(b, 1)
		benchPost(b, h.gw.URL, body)
		b.ReportAllocs()
		b.ResetTimer()
		for b.Loop() {
			benchPost(b, h.gw.URL, body)
		}
	})
}

// BenchmarkStampede fires bursts of identical requests over 3 instances
// sharing Redis and reports upstream calls per burst and how long waiters
// on other instances take to answer after the leader's client got its
// answer (the wake-up latency), with the pub/sub bus and with polling only.
func BenchmarkStampede(b *testing.B) {
	for _, mode := range []string{"pubsub", "poll"} {
		b.Run(mode, func(b *testing.B) {
			h, _ := distributed(b, 3, func(o *harnessOptions) {
				o.mock.Latency = 20 * time.Millisecond
				o.server = func(so *Options) {
					so.PollInterval = 50 * time.Millisecond
					if mode == "poll" {
						so.Bus = nil
					}
				}
			})
			const size = 100
			benchRounds(b, h, "upstream-calls/burst", "wake", func(burst int) (wakes []time.Duration) {
				got := timedBurst(h, size, chatBody(fmt.Sprintf("stampede %d", burst)))
				var leader time.Time
				for _, r := range got {
					if r.cache == cacheMiss {
						leader = r.at
					}
				}
				for _, r := range got {
					if r.cache == cacheCoalesced && r.instance != got[0].leaderInstance && r.at.After(leader) {
						wakes = append(wakes, r.at.Sub(leader))
					}
				}
				return wakes
			})
		})
	}
}

type timed struct {
	cache          string
	instance       int
	leaderInstance int
	at             time.Time
}

// timedBurst sends n identical requests round robin over the instances
// and records when each answer arrived.
func timedBurst(h *harness, n int, body string) []timed {
	out := make([]timed, n)
	atOnce(n, func(i int) {
		inst := i % len(h.gws)
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, h.gws[inst].URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		resp, err := benchClient.Do(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		out[i] = timed{cache: resp.Header.Get("X-Corral-Cache"), instance: inst, at: time.Now()}
	})
	leader := -1
	for _, r := range out {
		if r.cache == cacheMiss {
			leader = r.instance
		}
	}
	for i := range out {
		out[i].leaderInstance = leader
	}
	return out
}

// BenchmarkLiveStreamFollowers is issue 8's scenario: 50 identical
// streaming requests over 3 instances sharing Redis, the mock emitting 20
// chunks 100 ms apart. It reports upstream calls and how much later than
// the leader's client each follower got its first content chunk.
func BenchmarkLiveStreamFollowers(b *testing.B) {
	h, _ := distributed(b, 3, slowStream(20, 100*time.Millisecond))
	benchRounds(b, h, "upstream-calls/round", "first-chunk-lag", func(round int) (lags []time.Duration) {
		body := liveBody(fmt.Sprintf("live followers %d", round))
		leader := openStream(b, h.gws[0].URL, acmeKey, body)
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		followers := make([]*streamClient, 49)
		for i := range followers {
			followers[i] = openStream(b, h.bases()[(i+1)%3], acmeKey, body)
		}
		lead := drain(leader)
		for _, f := range followers {
			if d := drain(f); d.chunks > 0 {
				lags = append(lags, max(d.first.Sub(lead.first), 0))
			}
		}
		return lags
	})
}

// benchRounds runs round once per b.Loop iteration, numbered from 1 so that
// each round can send a prompt no earlier one sent. It reports the upstream
// calls per round as callsUnit, and the p50 and p99 of the latencies the
// rounds return as latency-p50-ms and latency-p99-ms.
func benchRounds(b *testing.B, h *harness, callsUnit, latency string, round func(n int) []time.Duration) {
	var lats []time.Duration
	var calls int64
	n := 0
	for b.Loop() {
		n++
		before := h.mock.Stats().Requests
		lats = append(lats, round(n)...)
		calls += h.mock.Stats().Requests - before
	}
	b.ReportMetric(float64(calls)/float64(n), callsUnit)
	if len(lats) > 0 {
		slices.Sort(lats)
		b.ReportMetric(float64(lats[len(lats)/2].Microseconds())/1000, latency+"-p50-ms")
		b.ReportMetric(float64(lats[len(lats)*99/100].Microseconds())/1000, latency+"-p99-ms")
	}
}

// BenchmarkFollowerMemory holds 1,000 followers on one slow stream in one
// gateway and reports the heap and goroutines they add, per follower. The
// test's own 1,000 HTTP clients live in the same process, so the figures
// are upper bounds for the gateway's share.
func BenchmarkFollowerMemory(b *testing.B) {
	const n = 1000
	for b.Loop() {
		gate := make(chan struct{})
		h := newHarness(b, func(o *harnessOptions) { o.mock.StreamChunks, o.gate = 4, gate })
		body := liveBody("a thousand followers")
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		g0 := runtime.NumGoroutine()
		clients := make([]*streamClient, n)
		var wg sync.WaitGroup
		for i := range clients {
			wg.Add(1)
			go func() { defer wg.Done(); clients[i] = openStream(b, h.gw.URL, acmeKey, body) }()
		}
		// Every follower has joined the one flight; the upstream is held,
		// so the stream is open and empty. (Headers come with the stream.)
		for h.srv.groupFor("acme").Stats().Joined < n-1 {
			time.Sleep(5 * time.Millisecond) // an internal counter: nothing to wait on
		}
		runtime.GC()
		var during runtime.MemStats
		runtime.ReadMemStats(&during)
		g1 := runtime.NumGoroutine()
		close(gate)
		wg.Wait()
		for _, c := range clients {
			drain(c)
		}
		b.ReportMetric(float64(during.HeapInuse-before.HeapInuse)/n, "heap-B/follower")
		b.ReportMetric(float64(g1-g0)/n, "goroutines/follower")
	}
}
