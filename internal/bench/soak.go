package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// SoakOptions configure Soak: minutes of mixed traffic through several
// gateways on one Redis that is restarted under them, with upstream
// faults, to see whether memory, goroutines and sockets come back to where
// they were.
type SoakOptions struct {
	// Duration is how long the traffic runs. Default 3m.
	Duration time.Duration
	// Instances is the number of gateway processes. Default 3.
	Instances int
	// Workers is the number of concurrent clients. Default 24.
	Workers int
	// RedisRestartEvery is the time between two Redis restarts (SIGTERM,
	// down for RedisDown, started again on the same port). Default 40s.
	RedisRestartEvery, RedisDown time.Duration
	// SampleEvery is the time between two samples under load. Default 15s.
	SampleEvery time.Duration
	// SourceDir is the module root to build from (default: above the
	// working directory).
	SourceDir string
	// Log receives progress lines. Default discard.
	Log io.Writer
}

// SoakSample is one gateway's footprint at one moment.
type SoakSample struct {
	Seconds    float64 `json:"seconds"` // since the traffic started
	Phase      string  `json:"phase"`   // baseline, load or end
	Instance   string  `json:"instance"`
	RSSKiB     int64   `json:"rss_kib"`
	Goroutines int     `json:"goroutines"` // go_goroutines from /metrics
	Sockets    int     `json:"sockets"`    // open socket descriptors
	FDs        int     `json:"fds"`        // every open descriptor
}

// SoakReport is what Soak measured.
type SoakReport struct {
	Machine       Machine          `json:"machine"`
	Started       time.Time        `json:"started"`
	Settings      SoakOptions      `json:"-"`
	Duration      string           `json:"duration"`
	Instances     int              `json:"instances"`
	Workers       int              `json:"workers"`
	RedisRestarts int              `json:"redis_restarts"`
	Requests      int64            `json:"requests"`
	Outcomes      map[string]int64 `json:"outcomes"` // kind status cache → count
	ClientErrors  map[string]int64 `json:"client_errors"`
	Samples       []SoakSample     `json:"samples"`
}

// soakKinds are the traffic mix, in proportion: repeated prompts (hits
// once stored), unique prompts (misses), streams (repeated and unique),
// bodies that are not JSON, and upstream faults (a 500, a stream cut
// midway, an answer that stalls after its headers until the upstream
// timeout, a 429).
var soakKinds = []struct {
	name   string
	weight int
}{
	{"hit", 40}, {"miss", 15}, {"stream-hit", 10}, {"stream-miss", 8},
	{"bad-body", 7}, {"upstream-500", 5}, {"stream-cut", 5}, {"stall", 2}, {"upstream-429", 3},
}

// Soak builds the gateway and the mock, starts Redis, the mock and
// o.Instances gateways (distributed mode, CORRAL_UPSTREAM_TIMEOUT 2s),
// samples each gateway at rest (baseline), runs the mixed traffic with a
// coalesced burst of identical prompts every 5 s and Redis restarts,
// sampling under load, then stops the traffic, lets it settle and samples
// again at rest (end). Flat means end ≈ baseline.
func Soak(ctx context.Context, so SoakOptions) (*SoakReport, error) {
	so.Duration = cmp.Or(so.Duration, 3*time.Minute)
	so.Instances = cmp.Or(so.Instances, 3)
	so.Workers = cmp.Or(so.Workers, 24)
	so.RedisRestartEvery = cmp.Or(so.RedisRestartEvery, 40*time.Second)
	so.RedisDown = cmp.Or(so.RedisDown, 3*time.Second)
	so.SampleEvery = cmp.Or(so.SampleEvery, 15*time.Second)
	o := Options{SourceDir: so.SourceDir, Log: so.Log}
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	pin := newPinner(false)
	rep := &SoakReport{Machine: machine(&o, pin), Started: time.Now().UTC(), Settings: so,
		Duration: so.Duration.String(), Instances: so.Instances, Workers: so.Workers,
		Outcomes: map[string]int64{}, ClientErrors: map[string]int64{}}

	dir, err := os.MkdirTemp("", "corralsoak-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	c := &cluster{o: &o, ps: &procs{pin: pin}, dir: dir}
	defer c.close()
	o.logf("soak: building")
	if err := c.build(ctx); err != nil {
		return nil, err
	}
	if err := c.startMock(ctx); err != nil {
		return nil, fmt.Errorf("mockllm: %w", err)
	}
	if err := c.startRedis(ctx); err != nil {
		return nil, err
	}
	rep.Machine.Redis = redisVersion()
	var gws []*proc
	for i := range so.Instances {
		p, err := c.startSoakGateway(ctx, fmt.Sprintf("corral-%d", i+1))
		if err != nil {
			return nil, err
		}
		gws = append(gws, p)
	}

	client := newClient(so.Workers * 2)
	defer client.CloseIdleConnections()
	start := time.Now()
	sample := func(phase string) {
		for _, p := range gws {
			s := soakSample(ctx, p)
			s.Seconds, s.Phase = time.Since(start).Seconds(), phase
			rep.Samples = append(rep.Samples, s)
			o.logf("soak: %s %s rss %d KiB, %d goroutines, %d sockets", phase, p.name, s.RSSKiB, s.Goroutines, s.Sockets)
		}
	}
	// A short warm-up so that the baseline has its pools and caches.
	t := &soakTraffic{c: client, gws: gws, rng: rand.New(rand.NewPCG(1, 2))}
	t.run(ctx, so.Workers, 10*time.Second)
	settle(ctx, client)
	start = time.Now()
	sample("baseline")

	lctx, stopLoad := context.WithTimeout(ctx, so.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { t.run(lctx, so.Workers, so.Duration) })
	wg.Go(func() {
		next := time.Now().Add(so.RedisRestartEvery)
		nextSample := time.Now().Add(so.SampleEvery)
		for lctx.Err() == nil {
			wake := next
			if nextSample.Before(wake) {
				wake = nextSample
			}
			if !sleepUntil(lctx, wake) {
				return
			}
			if !time.Now().Before(nextSample) {
				sample("load")
				nextSample = time.Now().Add(so.SampleEvery)
			}
			if !time.Now().Before(next) {
				o.logf("soak: restarting redis")
				if err := c.restartRedis(lctx, so.RedisDown); err != nil && lctx.Err() == nil {
					t.fail("redis restart: " + err.Error())
				} else {
					rep.RedisRestarts++
				}
				next = time.Now().Add(so.RedisRestartEvery)
			}
		}
	})
	wg.Wait()
	settle(ctx, client)
	sample("end")
	rep.Requests, rep.Outcomes, rep.ClientErrors = t.totals()
	for _, p := range gws {
		if p.exited() {
			return rep, fmt.Errorf("%s exited during the soak: %v\n%s", p.name, p.err, p.out.String())
		}
	}
	return rep, nil
}

// settle lets the gateways finish what is in flight and closes the load
// client's idle connections, so a sample at rest counts no client socket.
func settle(ctx context.Context, c *http.Client) {
	c.CloseIdleConnections()
	sleepUntil(ctx, time.Now().Add(5*time.Second)) // upstream timeouts (2s) and lock TTLs run out; nothing to wait on from outside
	c.CloseIdleConnections()
}

// startSoakGateway starts a distributed gateway with a short upstream
// timeout, so stalls and hangs are cut within the soak.
func (c *cluster) startSoakGateway(ctx context.Context, name string) (*proc, error) {
	return c.startServer(ctx, name, -1, "/readyz", func(addr string) ([]string, []string) {
		return childEnv(
			"CORRAL_ADDR="+addr,
			"CORRAL_UPSTREAM_URL=http://"+c.mock.addr+"/v1",
			"CORRAL_TENANTS_FILE="+c.tenantsFile,
			"CORRAL_REDIS_URL="+c.redisURL,
			"CORRAL_UPSTREAM_TIMEOUT=2s",
			"CORRAL_LOG_LEVEL=error",
			"CORRAL_SHUTDOWN_TIMEOUT=2s",
			"CORRAL_DATA_DIR="+filepath.Join(c.dir, "data-"+name),
		), []string{c.gatewayBin}
	})
}

// restartRedis stops Redis and starts it again on the same port after
// down, as an operator's restart (or a crash and a supervisor) would.
func (c *cluster) restartRedis(ctx context.Context, down time.Duration) error {
	addr := c.redis.addr
	c.ps.stop(c.redis, 2*time.Second)
	if !sleepUntil(ctx, time.Now().Add(down)) {
		return ctx.Err()
	}
	bin := c.redis.cmd.Path
	port := addr[strings.LastIndexByte(addr, ':')+1:]
	p, err := c.ps.start("redis-server", addr, -1, childEnv(), bin,
		"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", c.dir, "--loglevel", "warning", "--maxclients", "10000")
	if err != nil {
		return err
	}
	c.redis = p
	return pingUntil(ctx, c.rdb, p, 10*time.Second)
}

// soakSample reads one gateway's RSS and descriptors from /proc and its
// goroutines from /metrics.
func soakSample(ctx context.Context, p *proc) SoakSample {
	s := SoakSample{Instance: p.name}
	s.RSSKiB, _ = rssKiB(p.pid())
	fds, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid()))
	s.FDs = len(fds)
	for _, fd := range fds {
		if l, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", p.pid(), fd.Name())); err == nil && strings.HasPrefix(l, "socket:") {
			s.Sockets++
		}
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.Goroutines = -1
		return s
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_goroutines "); ok {
			s.Goroutines, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return s
}

// soakTraffic is the load: workers picking a kind of request by weight,
// round robin over the gateways, and a coalesced burst every 5 s.
type soakTraffic struct {
	c   *http.Client
	gws []*proc

	mu       sync.Mutex // protects rng, outcomes and errs
	rng      *rand.Rand
	outcomes map[string]int64
	errs     map[string]int64
	n        atomic.Int64
	unique   atomic.Int64
}

func (t *soakTraffic) run(ctx context.Context, workers int, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; ctx.Err() == nil; i += workers {
				t.one(ctx, t.gws[i%len(t.gws)], t.pick())
			}
		})
	}
	wg.Go(func() {
		for b := 0; sleepUntil(ctx, time.Now().Add(5*time.Second)); b++ {
			prompt := fmt.Sprintf("burst %d", t.unique.Add(1))
			var bw sync.WaitGroup
			for i := range 30 {
				bw.Go(func() { t.send(ctx, t.gws[i%len(t.gws)], "burst", chatJSON(prompt, false, ""), false) })
			}
			bw.Wait()
		}
	})
	wg.Wait()
}

func (t *soakTraffic) pick() string {
	total := 0
	for _, k := range soakKinds {
		total += k.weight
	}
	t.mu.Lock()
	r := t.rng.IntN(total)
	t.mu.Unlock()
	for _, k := range soakKinds {
		if r < k.weight {
			return k.name
		}
		r -= k.weight
	}
	return soakKinds[0].name
}

func (t *soakTraffic) one(ctx context.Context, gw *proc, kind string) {
	t.mu.Lock()
	hot := t.rng.IntN(50)
	t.mu.Unlock()
	unique := func() string { return fmt.Sprintf("unique %d", t.unique.Add(1)) }
	switch kind {
	case "hit":
		t.send(ctx, gw, kind, chatJSON(fmt.Sprintf("hot %d", hot), false, ""), false)
	case "miss":
		t.send(ctx, gw, kind, chatJSON(unique(), false, ""), false)
	case "stream-hit":
		t.send(ctx, gw, kind, chatJSON(fmt.Sprintf("hot %d", hot), true, ""), true)
	case "stream-miss":
		t.send(ctx, gw, kind, chatJSON(unique(), true, ""), true)
	case "bad-body":
		t.send(ctx, gw, kind, []byte(`{"model":"gpt-4o-mini","messages":[{"role":`), false)
	case "upstream-500":
		t.send(ctx, gw, kind, chatJSON(unique(), false, "mock-500"), false)
	case "upstream-429":
		t.send(ctx, gw, kind, chatJSON(unique(), false, "mock-429"), false)
	case "stream-cut":
		t.send(ctx, gw, kind, chatJSON(unique(), true, "mock-cut"), true)
	case "stall":
		t.send(ctx, gw, kind, chatJSON(fmt.Sprintf("stall %d", hot%5), hot%2 == 0, "mock-stall"), hot%2 == 0)
	}
}

func chatJSON(text string, stream bool, model string) []byte {
	return fmt.Appendf(nil, `{"model":%q,"stream":%t,"messages":[{"role":"user","content":%q}]}`, cmp.Or(model, "gpt-4o-mini"), stream, text)
}

// send makes one request and counts its outcome: kind, status and
// X-Corral-Cache, and for streams whether it ended with [DONE] or an
// error event.
func (t *soakTraffic) send(ctx context.Context, gw *proc, kind string, body []byte, stream bool) {
	rctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, "http://"+gw.addr+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+benchKey)
	req.Header.Set("Content-Type", "application/json")
	resp, err := t.c.Do(req)
	t.n.Add(1)
	if err != nil {
		if ctx.Err() == nil {
			t.fail(kind + ": " + errClass(err))
		}
		return
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		if ctx.Err() == nil {
			t.fail(kind + ": read: " + errClass(err))
		}
		// The soak's own end cut this read: what arrived says nothing
		// about how the gateway would have ended the answer.
		return
	}
	out := fmt.Sprintf("%s %d %s", kind, resp.StatusCode, cmp.Or(resp.Header.Get("X-Corral-Cache"), "-"))
	if stream && resp.StatusCode == 200 {
		switch {
		case bytes.HasSuffix(b, []byte("data: [DONE]\n\n")):
			out += " done"
		case bytes.Contains(b, []byte(`data: {"error"`)):
			out += " error-event"
		default:
			out += " bare-close"
		}
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.outcomes == nil {
		t.outcomes = map[string]int64{}
	}
	t.outcomes[out]++
}

func (t *soakTraffic) fail(what string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.errs == nil {
		t.errs = map[string]int64{}
	}
	t.errs[what]++
}

// errClass keeps an error's message without the addresses and ports that
// make every one of them different.
func errClass(err error) string {
	s := err.Error()
	if i := strings.LastIndex(s, ": "); i >= 0 {
		return s[i+2:]
	}
	return s
}

func (t *soakTraffic) totals() (int64, map[string]int64, map[string]int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n.Load(), t.outcomes, t.errs
}

// WriteSoak writes the report as markdown: the samples at rest and under
// load per instance, the outcomes and the client errors.
func WriteSoak(w io.Writer, r *SoakReport) {
	fmt.Fprintf(w, "Soak: %s of mixed traffic, %d workers, %d gateways on one redis-server restarted %d times; %d requests.\n\n",
		r.Duration, r.Workers, r.Instances, r.RedisRestarts, r.Requests)
	fmt.Fprintln(w, "| instance | phase | t (s) | RSS (MiB) | goroutines | sockets | fds |")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|---:|---:|")
	for _, s := range r.Samples {
		fmt.Fprintf(w, "| %s | %s | %.0f | %.1f | %d | %d | %d |\n", s.Instance, s.Phase, s.Seconds, float64(s.RSSKiB)/1024, s.Goroutines, s.Sockets, s.FDs)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| kind status X-Corral-Cache [stream end] | count |")
	fmt.Fprintln(w, "|---|---:|")
	for _, k := range sortedKeys(r.Outcomes) {
		fmt.Fprintf(w, "| %s | %d |\n", k, r.Outcomes[k])
	}
	if len(r.ClientErrors) > 0 {
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| client error | count |")
		fmt.Fprintln(w, "|---|---:|")
		for _, k := range sortedKeys(r.ClientErrors) {
			fmt.Fprintf(w, "| %s | %d |\n", k, r.ClientErrors[k])
		}
	}
}

func sortedKeys(m map[string]int64) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
