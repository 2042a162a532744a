package bench

import (
	"context"
	"fmt"
	"io"
)

// Overhead cases. Closed loop at 1 connection shows added latency, at 32
// connections maximum throughput; the open-loop case shows latency at a
// fixed, moderate rate, as real traffic arrives.
var (
	overheadLatencies = []int{0, 50} // mock latency, ms
	overheadConns     = []int{1, 32}
)

func overheadCase(latencyMS, conns int) string {
	return fmt.Sprintf("mock %d ms, %d conns", latencyMS, conns)
}

func overheadRateCase(rate float64) string {
	return fmt.Sprintf("mock 0 ms, %.0f req/s fixed rate", rate)
}

// proxyTargets are the sides of the overhead and hit comparisons: the
// mock itself, the floor proxy, Corral embedded and Corral in Redis mode.
// A Redis-mode gateway that cannot start (no redis-server) is left out
// and recorded, the rest still run.
func (h *harness) proxyTargets(ctx context.Context, embeddedName, redisName string) ([]target, error) {
	floor, err := h.floorProxy(ctx)
	if err != nil {
		return nil, err
	}
	gw, err := h.embedded(ctx)
	if err != nil {
		return nil, err
	}
	ts := []target{
		chatTarget("direct", h.c.mock, false),
		chatTarget("floor", floor, false),
		chatTarget(embeddedName, gw, true),
	}
	if rg, err := h.redisGateways(ctx, 1); err != nil {
		h.o.logf("Redis mode skipped: %v", err)
		h.rep.Errors = append(h.rep.Errors, "redis mode: "+err.Error())
	} else {
		ts = append(ts, chatTarget(redisName, rg[0], true))
	}
	return ts, nil
}

// overhead is scenario 1: the upstream path (Cache-Control: no-store, so
// Corral neither reads nor writes its cache) against the mock directly
// and against the floor proxy.
func (h *harness) overhead(ctx context.Context) error {
	ts, err := h.proxyTargets(ctx, "corral-embedded", "corral-redis")
	if err != nil {
		return err
	}
	hdr := benchHeader("no-store")
	for _, lat := range overheadLatencies {
		body := chatBody("Summarise the overhead of a gateway in one sentence.", false, mockControl{LatencyMS: lat})
		for _, conns := range overheadConns {
			cs := caseSpec{scenario: ScenarioOverhead, name: overheadCase(lat, conns), latencyMS: lat}
			gs, err := h.compare(ctx, cs, ts, func(ctx context.Context, t target) (RunResult, error) {
				spec := reqSpec{url: t.url, header: hdr, body: constBody(body), wantCache: t.want("BYPASS")}
				return closedLoop(ctx, spec, conns, h.o.Warmup, h.o.Duration, h.watch(t)), nil
			})
			if err != nil {
				return err
			}
			h.rep.Overhead = append(h.rep.Overhead, gs...)
		}
	}
	body := chatBody("Summarise the overhead of a gateway in one sentence.", false, mockControl{})
	cs := caseSpec{scenario: ScenarioOverhead, name: overheadRateCase(h.o.Rate)}
	gs, err := h.compare(ctx, cs, ts, func(ctx context.Context, t target) (RunResult, error) {
		spec := reqSpec{url: t.url, header: hdr, body: constBody(body), wantCache: t.want("BYPASS")}
		return openLoop(ctx, spec, h.o.Rate, 2048, h.o.Warmup, h.o.Duration, h.watch(t)), nil
	})
	if err != nil {
		return err
	}
	h.rep.Overhead = append(h.rep.Overhead, gs...)
	writeOverhead(h.o.Tables, h.rep.Overhead)
	return nil
}

func writeOverhead(w io.Writer, gs []Group) {
	fmt.Fprintf(w, "\n## 1. Overhead: upstream path (`Cache-Control: no-store`)\n")
	for _, name := range groupCases(gs) {
		fmt.Fprintf(w, "\n### %s\n\n", name)
		direct, floor := findGroup(gs, name, "direct"), findGroup(gs, name, "floor")
		t := &table{head: []string{"target", "req/s", "p50 ms", "p99 ms", "+p50 vs direct", "+p50 vs floor", "req/s vs floor", "proxy CPU", "proxy CPU µs/req", "load core CPU", "other procs CPU", "errors"}}
		for i := range gs {
			g := &gs[i]
			if g.Case != name {
				continue
			}
			t.add(g.Target, fmtRate(g.Throughput), fmtMS(g.P50), fmtMS(g.P99),
				fmtDelta(direct, g, p50Of), fmtDelta(floor, g, p50Of),
				fmtRatio(g, floor, throughputOf), fmtCores(g.ProxyCPU), fmtUS(g.CPUPerRequest), fmtCores(g.LoadCoreCPU), fmtCores(g.OtherCPU), fmtErrors(g))
		}
		t.write(w)
	}
}
