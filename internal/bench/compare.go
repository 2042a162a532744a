package bench

import (
	"context"
	"encoding/json"
	"math"
	"net/http"
	"slices"
)

// target is one side of a comparison: where requests go and which
// process does the proxying (its CPU use is reported).
type target struct {
	name   string
	url    string // the endpoint, e.g. http://127.0.0.1:1234/v1/chat/completions
	proc   *proc  // the process under test; the mock for "direct"
	corral bool   // answers carry X-Corral-Cache
}

func chatTarget(name string, p *proc, corral bool) target {
	return target{name: name, url: "http://" + p.addr + "/v1/chat/completions", proc: p, corral: corral}
}

// want returns the cache status a Corral target must answer with, and ""
// for targets that are not Corral.
func (t target) want(status string) string {
	if t.corral {
		return status
	}
	return ""
}

// caseSpec names one comparison: the same load against every target.
type caseSpec struct {
	scenario  string
	name      string
	latencyMS int
}

// Group is one side of one comparison over its repetitions.
type Group struct {
	Scenario      string `json:"scenario"`
	Case          string `json:"case"`
	MockLatencyMS int    `json:"mock_latency_ms"`
	Target        string `json:"target"`

	Throughput Spread  `json:"throughput_rps"`
	P50        Spread  `json:"p50_ms"`
	P99        Spread  `json:"p99_ms"`
	TTFBP50    *Spread `json:"ttfb_p50_ms,omitempty"`
	TTFBP99    *Spread `json:"ttfb_p99_ms,omitempty"`
	// ProxyCPU is the cores the target's process used (the mock's for
	// "direct"); LoadCPU the harness's own.
	ProxyCPU Spread `json:"proxy_cpu_cores"`
	LoadCPU  Spread `json:"loadgen_cpu_cores"`
	// LoadCoreCPU is the load core's processes together: the harness, the
	// mock (when it is not the target) and Redis. Near 1.0 the load side,
	// not the proxy, was the limit.
	LoadCoreCPU Spread `json:"load_core_cpu_cores"`
	// OtherCPU is the cores used by processes that are not part of the
	// run (other work on a shared machine): the run's noise.
	OtherCPU Spread `json:"other_processes_cpu_cores"`
	// CPUPerRequest is the proxy's CPU time per answered request, in
	// microseconds: its cost independent of who was the bottleneck.
	CPUPerRequest Spread `json:"proxy_cpu_us_per_request"`
	Errors        int64  `json:"errors"`
	Unexpected    int64  `json:"unexpected_cache_status"`
	// Redis, for Redis-mode hit runs: commands (by name, and "total") and
	// socket reads ("reads", about one per round trip) per request.
	Redis map[string]Spread `json:"redis_per_request,omitempty"`

	Runs []RunResult `json:"runs"`
	proc string      // name of the watched process, for ProxyCPU
}

// runFunc does one load run of t.
type runFunc func(ctx context.Context, t target) (RunResult, error)

// compare runs every target o.Reps times, alternating between targets so
// that drift on a shared machine hits every side alike. Each repetition
// starts one target further along (A B C, B C A, C A B) so that no side
// always runs first, after an idle pause, or last.
func (h *harness) compare(ctx context.Context, cs caseSpec, targets []target, run runFunc) ([]Group, error) {
	groups := make([]Group, len(targets))
	for i, t := range targets {
		groups[i] = Group{Scenario: cs.scenario, Case: cs.name, MockLatencyMS: cs.latencyMS, Target: t.name, proc: t.proc.name}
	}
	for rep := range h.o.Reps {
		for k := range targets {
			i := (rep + k) % len(targets)
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			profiled := h.startProfiles(ctx, cs, targets[i], rep+1)
			r, err := run(ctx, targets[i])
			profiled(r.Throughput)
			if err != nil {
				return nil, err
			}
			r.Target, r.Rep = targets[i].name, rep+1
			groups[i].Runs = append(groups[i].Runs, r)
			h.o.logf("  %s | %s | rep %d/%d | %s: %.0f req/s, p50 %.3f ms, p99 %.3f ms, errors %d",
				cs.scenario, cs.name, rep+1, h.o.Reps, targets[i].name, r.Throughput, r.Latency.P50, r.Latency.P99, r.Errors+r.Unexpected)
		}
	}
	for i := range groups {
		groups[i].aggregate()
	}
	return groups, nil
}

func (g *Group) aggregate() {
	g.Throughput = g.over(func(r RunResult) float64 { return r.Throughput })
	g.P50 = g.over(func(r RunResult) float64 { return r.Latency.P50 })
	g.P99 = g.over(func(r RunResult) float64 { return r.Latency.P99 })
	// TTFB over the runs that completed a stream: on a loaded machine a
	// run's window can close before any did, and a zero would pull the
	// median down.
	var p50s, p99s []float64
	for _, r := range g.Runs {
		if r.TTFB != nil {
			p50s, p99s = append(p50s, r.TTFB.P50), append(p99s, r.TTFB.P99)
		}
	}
	if len(p50s) > 0 {
		p50, p99 := spreadOf(p50s), spreadOf(p99s)
		g.TTFBP50, g.TTFBP99 = &p50, &p99
	}
	g.ProxyCPU = g.over(func(r RunResult) float64 { return r.CPU[g.proc] })
	g.LoadCPU = g.over(func(r RunResult) float64 { return r.CPU["loadgen"] })
	g.LoadCoreCPU = g.over(func(r RunResult) float64 { return loadCore(r, g.proc) })
	g.OtherCPU = g.over(func(r RunResult) float64 { return r.CPU[cpuOthers] })
	g.CPUPerRequest = g.over(func(r RunResult) float64 { return cpuPerRequest(r, g.proc) })
	g.Errors, g.Unexpected = 0, 0
	for _, r := range g.Runs {
		g.Errors += r.Errors
		g.Unexpected += r.Unexpected
	}
	if len(g.Runs) > 0 && g.Runs[0].Redis != nil {
		g.Redis = make(map[string]Spread)
		for name := range g.Runs[0].Redis {
			g.Redis[name] = g.over(func(r RunResult) float64 { return r.Redis[name] })
		}
	}
}

// loadCore sums the CPU of the processes on the load core, leaving out
// the target's own process (the mock, for "direct").
func loadCore(r RunResult, target string) float64 {
	sum := 0.0
	for _, name := range []string{"loadgen", "mockllm", "redis-server"} {
		if name != target {
			sum += r.CPU[name]
		}
	}
	return sum
}

// cpuPerRequest is the target process's CPU microseconds per request.
func cpuPerRequest(r RunResult, target string) float64 {
	if r.Throughput == 0 {
		return math.NaN()
	}
	return r.CPU[target] / r.Throughput * 1e6
}

func ttfb(r RunResult) Summary {
	if r.TTFB == nil {
		return Summary{}
	}
	return *r.TTFB
}

func (g *Group) over(f func(RunResult) float64) Spread {
	xs := make([]float64, len(g.Runs))
	for i, r := range g.Runs {
		xs[i] = f(r)
	}
	return spreadOf(xs)
}

// paired compares two groups of one comparison repetition by repetition
// (each pair ran back to back), e.g. a/b throughput, and describes the
// per-repetition values.
func paired(a, b *Group, f func(RunResult) float64, op func(x, y float64) float64) Spread {
	n := min(len(a.Runs), len(b.Runs))
	xs := make([]float64, n)
	for i := range n {
		xs[i] = op(f(a.Runs[i]), f(b.Runs[i]))
	}
	return spreadOf(xs)
}

func ratio(x, y float64) float64 {
	if y == 0 {
		return math.NaN()
	}
	return x / y
}

func delta(x, y float64) float64 { return x - y }

func throughputOf(r RunResult) float64 { return r.Throughput }
func p50Of(r RunResult) float64        { return r.Latency.P50 }

// ttfbP50Of is NaN for a run that completed no stream, so the paired
// comparisons leave that pair out rather than count it as 0 ms.
func ttfbP50Of(r RunResult) float64 {
	if r.TTFB == nil {
		return math.NaN()
	}
	return r.TTFB.P50
}

// findGroup returns the group of target in case, or nil.
func findGroup(gs []Group, caseName, target string) *Group {
	i := slices.IndexFunc(gs, func(g Group) bool { return g.Case == caseName && g.Target == target })
	if i < 0 {
		return nil
	}
	return &gs[i]
}

// watch lists the processes whose CPU a run of t reports: t's own, the
// mock's and Redis's.
func (h *harness) watch(t target) []*proc {
	w := []*proc{t.proc}
	for _, p := range []*proc{h.c.mock, h.c.redis} {
		if p != nil && p != t.proc {
			w = append(w, p)
		}
	}
	return w
}

// benchHeader is what every request carries: the bench tenant's key, and
// Cache-Control when cc is set. Direct and floor requests carry the same
// headers as Corral's; the mock ignores them.
func benchHeader(cc string) http.Header {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+benchKey)
	h.Set("Content-Type", "application/json")
	if cc != "" {
		h.Set("Cache-Control", cc)
	}
	return h
}

// mockControl is the body's "mock" member: per-request latency and stream
// pacing for cmd/mockllm (see internal/mockllm). The gateway forwards
// bodies untouched, so the control reaches the mock through any proxy.
type mockControl struct {
	LatencyMS    int `json:"latency_ms,omitempty"`
	Chunks       int `json:"chunks,omitempty"`
	ChunkDelayMS int `json:"chunk_delay_ms,omitempty"`
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Stream   bool          `json:"stream,omitempty"`
	Mock     *mockControl  `json:"mock,omitempty"`
}

// systemPrompt makes the bodies about the size of a small real chat
// request (about 300 bytes), like the micro benchmarks' body.
const systemPrompt = "You are a concise assistant for an internal platform team. Answer in one short paragraph and cite the relevant runbook when there is one."

// chatBody is a chat completion request for prompt.
func chatBody(prompt string, stream bool, mc mockControl) []byte {
	req := chatRequest{
		Model:    "gpt-4o-mini",
		Messages: []chatMessage{{Role: "system", Content: systemPrompt}, {Role: "user", Content: prompt}},
		Stream:   stream,
	}
	if mc != (mockControl{}) {
		req.Mock = &mc
	}
	b, err := json.Marshal(req)
	if err != nil {
		panic(err) // a fixed struct of strings and ints always marshals
	}
	return b
}

// constBody sends the same body every time.
func constBody(b []byte) func(int64) []byte { return func(int64) []byte { return b } }
