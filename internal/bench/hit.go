package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"
)

// hitConns is the hit scenario's concurrency: the throughput comparison
// of the targets.
const hitConns = 32

// Hit targets beside the proxy targets.
const (
	hitMemory = "corral-memory-hit"
	hitInfo   = "corral-memory-hit-info" // the same at CORRAL_LOG_LEVEL=info
	hitStatic = "static"                 // a bare net/http handler sending a hit's bytes
)

func hitCase() string { return fmt.Sprintf("mock 0 ms, %d conns", hitConns) }

// hit is scenario 2: cache hits from memory and from Redis against the
// mock answering directly (0 ms) and through the floor proxy. The same
// body is sent every time, primed once in each gateway's cache; an answer
// that is not a HIT is counted as unexpected. In Redis mode the run also
// reports Redis commands and socket reads per request from INFO.
func (h *harness) hit(ctx context.Context) error {
	ts, err := h.proxyTargets(ctx, hitMemory, "corral-redis-hit")
	if err != nil {
		return err
	}
	// The same embedded gateway at the default log level (info, every
	// request writes its access line to stderr, a pipe read by the
	// harness): what access logging costs a hit.
	info, err := h.c.startGateway(ctx, "corral-info", false, "CORRAL_LOG_LEVEL=info")
	if err != nil {
		return fmt.Errorf("gateway (info log): %w", err)
	}
	ts = append(ts, chatTarget(hitInfo, info, true))
	hdr := benchHeader("")
	body := chatBody("What does a cache hit cost?", false, mockControl{})
	for _, t := range ts {
		if t.corral {
			if err := prime(ctx, t.url, hdr, body); err != nil {
				return fmt.Errorf("prime %s: %w", t.name, err)
			}
		}
	}
	// The static handler sends what the embedded gateway's hit sends.
	a, err := captureAnswer(ctx, ts[2].url, hdr, body)
	if err != nil {
		return fmt.Errorf("capture a hit: %w", err)
	}
	static, err := h.c.startStatic(ctx, a)
	if err != nil {
		return fmt.Errorf("static handler: %w", err)
	}
	ts = append(ts, chatTarget(hitStatic, static, false))
	cs := caseSpec{scenario: ScenarioHit, name: hitCase()}
	gs, err := h.compare(ctx, cs, ts, func(ctx context.Context, t target) (RunResult, error) {
		spec := reqSpec{url: t.url, header: hdr, body: constBody(body), wantCache: t.want("HIT")}
		redisMode := t.proc != h.c.mock && h.c.redis != nil && slices.Contains(h.gwRedis, t.proc)
		if !redisMode {
			return closedLoop(ctx, spec, hitConns, h.o.Warmup, h.o.Duration, h.watch(t)), nil
		}
		before, err := h.redisCounters(ctx)
		if err != nil {
			return RunResult{}, err
		}
		r := closedLoop(ctx, spec, hitConns, h.o.Warmup, h.o.Duration, h.watch(t))
		after, err := h.redisCounters(ctx)
		if err != nil {
			return RunResult{}, err
		}
		r.Redis = perRequest(before, after, r.Sent)
		return r, nil
	})
	if err != nil {
		return err
	}
	h.rep.Hit = gs
	writeHit(h.o.Tables, gs)
	return nil
}

// prime stores body's answer in a gateway's cache and checks that the
// next request is a HIT.
func prime(ctx context.Context, url string, hdr http.Header, body []byte) error {
	c := newClient(1)
	defer c.CloseIdleConnections()
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var a answer
	for range 2 {
		if a = doRequest(rctx, c, url, hdr, body, false, nil); a.err != nil {
			return a.err
		}
	}
	if a.cache != "HIT" {
		return fmt.Errorf("second request answered %q, want HIT", a.cache)
	}
	return nil
}

// redisCounters reads Redis's command counts and its socket reads
// (INFO stats total_reads_processed: one per read event, which with
// go-redis's request/response pattern is about one per round trip; a
// pipeline of several commands is one read).
func (h *harness) redisCounters(ctx context.Context) (map[string]int64, error) {
	m, err := h.c.commandStats(ctx)
	if err != nil {
		return nil, err
	}
	stats, err := h.c.rdb.Info(ctx, "stats").Result()
	if err != nil {
		return nil, err
	}
	for line := range strings.Lines(stats) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_reads_processed:"); ok {
			var n int64
			if _, err := fmt.Sscan(v, &n); err == nil {
				m[readsKey] = n
			}
		}
	}
	return m, nil
}

const readsKey = "(socket reads)"

// perRequest turns counter deltas into per-request numbers. The harness's
// own INFO calls are left out; "total" sums the commands.
func perRequest(before, after map[string]int64, requests int64) map[string]float64 {
	if requests <= 0 {
		return nil
	}
	out := map[string]float64{}
	var total int64
	for name, n := range after {
		d := n - before[name]
		if name == "info" || d <= 0 {
			continue
		}
		if name == readsKey {
			// Two INFO calls of the harness each cost a read.
			d = max(d-2, 0)
		} else {
			total += d
		}
		out[name] = float64(d) / float64(requests)
	}
	out["total"] = float64(total) / float64(requests)
	return out
}

func writeHit(w io.Writer, gs []Group) {
	fmt.Fprintf(w, "\n## 2. Hit path (%s)\n\n", hitCase())
	floor := findGroup(gs, hitCase(), "floor")
	static := findGroup(gs, hitCase(), hitStatic)
	t := &table{head: []string{"target", "req/s", "p50 ms", "p99 ms", "req/s vs floor", "req/s vs static", "proxy CPU", "proxy CPU µs/req", "load core CPU", "other procs CPU", "errors / not HIT"}}
	for i := range gs {
		g := &gs[i]
		t.add(g.Target, fmtRate(g.Throughput), fmtMS(g.P50), fmtMS(g.P99),
			fmtRatio(g, floor, throughputOf), fmtRatio(g, static, throughputOf), fmtCores(g.ProxyCPU), fmtUS(g.CPUPerRequest), fmtCores(g.LoadCoreCPU), fmtCores(g.OtherCPU), fmtErrors(g))
	}
	t.write(w)
	if off, on := findGroup(gs, hitCase(), hitMemory), findGroup(gs, hitCase(), hitInfo); off != nil && on != nil {
		fmt.Fprintf(w, "\nAccess logging at info, hit req/s with ÷ without: %s\n", fmtRatio(on, off, throughputOf))
	}
	for i := range gs {
		g := &gs[i]
		if g.Redis == nil {
			continue
		}
		fmt.Fprintf(w, "\nRedis work per request, %s (INFO commandstats and total_reads_processed deltas over the run, warm-up included):\n\n", g.Target)
		rt := &table{head: []string{"command", "per request"}}
		names := make([]string, 0, len(g.Redis))
		for name := range g.Redis {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			rt.add(name, fmt.Sprintf("%.3f (%.3f–%.3f)", g.Redis[name].Median, g.Redis[name].Min, g.Redis[name].Max))
		}
		rt.write(w)
	}
}
