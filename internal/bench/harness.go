package bench

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Scenario names, in the order Run runs them.
const (
	ScenarioOverhead  = "overhead"
	ScenarioHit       = "hit"
	ScenarioStampede  = "stampede"
	ScenarioStreaming = "streaming"
	ScenarioFootprint = "footprint"
	ScenarioTenantHit = "tenant-hit"
)

// AllScenarios is the standard set.
var AllScenarios = []string{ScenarioOverhead, ScenarioHit, ScenarioStampede, ScenarioStreaming, ScenarioFootprint, ScenarioTenantHit}

// Options configure a harness run. Zero fields take the standard set's
// values (see Standard); Quick gives the smoke run's.
type Options struct {
	// SourceDir is the module root whose cmd/gateway and cmd/mockllm are
	// built and whose internal/server benchmarks give allocations per
	// request. Default: the module root above the working directory.
	SourceDir string
	// FloorCommand is the argv that runs the floor proxy (a binary that
	// calls MaybeRunFloor). Default: this executable.
	FloorCommand []string
	// Go is the go command. Default "go" from PATH.
	Go string

	// Scenarios to run; default AllScenarios.
	Scenarios []string
	// Reps is how many times every side of a comparison runs; sides
	// alternate (A B C, A B C, ...). Default 3.
	Reps int
	// Duration is the measured part of one load run; Warmup runs before it
	// unrecorded. Defaults 2s and 250ms.
	Duration, Warmup time.Duration
	// Rate is the fixed-rate (open loop) run's requests per second with
	// the mock at 0 ms. Default 2000.
	Rate float64
	// StampedeSizes are the burst sizes; StampedeBursts how many bursts of
	// each size per configuration. Defaults 100 and 1000; 10.
	StampedeSizes  []int
	StampedeBursts int
	// FollowerBursts is how many bursts of concurrent identical streams the
	// streaming scenario fires per configuration. Default 10.
	FollowerBursts int
	// OpenStreams are the footprint scenario's stream counts. Default 1000
	// and 5000.
	OpenStreams []int
	// AllocBenchtime is -benchtime for the -benchmem run of the
	// internal/server benchmarks; "-" skips it. Default 2000x.
	AllocBenchtime string

	// PprofDir, when set, turns on profiling (see pprof.go): gateways
	// serve net/http/pprof on their own loopback port, and every load run
	// of a comparison against a gateway saves a CPU and an allocation
	// profile of its measured window here.
	PprofDir string

	// Pin pins processes with taskset when it exists (see pin.go).
	Pin bool
	// Quick marks the run as a smoke run in the report.
	Quick bool
	// Label is free text stored in the report (what was measured).
	Label string
	// Log receives progress lines; Tables the markdown tables. Default
	// discard.
	Log, Tables io.Writer
}

// Standard returns the options of `make bench`.
func Standard() Options {
	return Options{Pin: true}
}

// Quick returns the options of a smoke run (about a minute): every
// scenario, smaller numbers, still three alternating repetitions.
func Quick() Options {
	return Options{
		Pin:            true,
		Quick:          true,
		Duration:       300 * time.Millisecond,
		Warmup:         100 * time.Millisecond,
		StampedeSizes:  []int{100, 1000},
		StampedeBursts: 3,
		FollowerBursts: 3,
		OpenStreams:    []int{200, 1000},
		AllocBenchtime: "200x",
	}
}

func (o *Options) setDefaults() error {
	if o.SourceDir == "" {
		dir, err := moduleRoot()
		if err != nil {
			return err
		}
		o.SourceDir = dir
	}
	if len(o.FloorCommand) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("floor command: %w", err)
		}
		o.FloorCommand = []string{exe}
	}
	if len(o.Scenarios) == 0 {
		o.Scenarios = AllScenarios
	}
	for _, s := range o.Scenarios {
		if !slices.Contains(AllScenarios, s) {
			return fmt.Errorf("unknown scenario %q (have %s)", s, strings.Join(AllScenarios, ", "))
		}
	}
	o.Reps = cmp.Or(o.Reps, 3)
	o.Duration = cmp.Or(o.Duration, 2*time.Second)
	o.Warmup = cmp.Or(o.Warmup, 250*time.Millisecond)
	o.Rate = cmp.Or(o.Rate, 2000)
	if len(o.StampedeSizes) == 0 {
		o.StampedeSizes = []int{100, 1000}
	}
	o.StampedeBursts = cmp.Or(o.StampedeBursts, 10)
	o.FollowerBursts = cmp.Or(o.FollowerBursts, 10)
	if len(o.OpenStreams) == 0 {
		o.OpenStreams = []int{1000, 5000}
	}
	o.AllocBenchtime = cmp.Or(o.AllocBenchtime, "2000x")
	if o.Log == nil {
		o.Log = io.Discard
	}
	if o.Tables == nil {
		o.Tables = io.Discard
	}
	return nil
}

func (o *Options) goTool() string { return cmp.Or(o.Go, "go") }

func (o *Options) has(s string) bool { return slices.Contains(o.Scenarios, s) }

func (o *Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Log, "corralbench: "+format+"\n", args...)
}

// Report is everything one run measured; it is written as JSON.
type Report struct {
	Started  time.Time `json:"started"`
	Seconds  float64   `json:"elapsed_seconds"`
	Machine  Machine   `json:"machine"`
	Settings Settings  `json:"settings"`

	Overhead    []Group          `json:"overhead,omitempty"`
	Hit         []Group          `json:"hit,omitempty"`
	TenantHit   []Group          `json:"tenant_hit,omitempty"`
	Stampede    []StampedeGroup  `json:"stampede,omitempty"`
	Streaming   []Group          `json:"streaming,omitempty"`
	Followers   []FollowerGroup  `json:"stream_followers,omitempty"`
	Footprint   []FootprintPoint `json:"footprint,omitempty"`
	Allocations []AllocResult    `json:"allocations,omitempty"`
	// Profiles are the files saved with -pprof.
	Profiles []ProfileFile `json:"profiles,omitempty"`

	// Checks are the targets, each PASS, MISS or INFO.
	Checks []Check `json:"checks"`
	// Errors are scenarios that failed; the others still ran.
	Errors []string `json:"errors,omitempty"`
}

// Machine is where the numbers come from.
type Machine struct {
	CPUModel  string `json:"cpu_model"`
	NumCPU    int    `json:"num_cpu"`
	Kernel    string `json:"kernel"`
	GoVersion string `json:"go_version"`
	Redis     string `json:"redis_version,omitempty"`
	Commit    string `json:"commit,omitempty"`
	Dirty     bool   `json:"dirty_tree,omitempty"`
	// Pinned says whether taskset pinned the proxy under test to CPU
	// ProxyCPU and the load generator, mock and Redis to LoadCPU.
	Pinned    bool   `json:"pinned"`
	PinReason string `json:"pin_reason,omitempty"`
	ProxyCPU  int    `json:"proxy_cpu"`
	LoadCPU   int    `json:"load_cpu"`
	// NoFile is the open-files limit the harness and its children had.
	NoFile uint64 `json:"rlimit_nofile"`
}

// Settings are the run's knobs after defaults.
type Settings struct {
	Label          string   `json:"label,omitempty"`
	Quick          bool     `json:"quick"`
	Scenarios      []string `json:"scenarios"`
	Reps           int      `json:"reps"`
	Duration       string   `json:"duration"`
	Warmup         string   `json:"warmup"`
	Rate           float64  `json:"rate_rps"`
	StampedeSizes  []int    `json:"stampede_sizes"`
	StampedeBursts int      `json:"stampede_bursts"`
	FollowerBursts int      `json:"follower_bursts"`
	OpenStreams    []int    `json:"open_streams"`
	AllocBenchtime string   `json:"alloc_benchtime"`
	SourceDir      string   `json:"source_dir"`
	PprofDir       string   `json:"pprof_dir,omitempty"`
}

// Run builds the gateway and the mock, starts the processes each
// scenario needs, runs the scenarios, prints their tables and returns the
// report. Every child process is stopped before Run returns, whatever
// happened; a child also dies with the harness (Pdeathsig). A failing
// scenario is recorded in Report.Errors and the next one runs; Run's
// error is only for failures that stop everything (build, mock start,
// ctx).
//
// With Pin set and taskset available, Run pins its own process to the
// load CPU for good.
func Run(ctx context.Context, o Options) (*Report, error) {
	if err := o.setDefaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	rep := &Report{Started: start.UTC(), Settings: Settings{
		Label: o.Label, Quick: o.Quick, Scenarios: o.Scenarios, Reps: o.Reps,
		Duration: o.Duration.String(), Warmup: o.Warmup.String(), Rate: o.Rate,
		StampedeSizes: o.StampedeSizes, StampedeBursts: o.StampedeBursts,
		FollowerBursts: o.FollowerBursts, OpenStreams: o.OpenStreams,
		AllocBenchtime: o.AllocBenchtime, SourceDir: o.SourceDir, PprofDir: o.PprofDir,
	}}
	defer func() { rep.Seconds = time.Since(start).Seconds() }()

	pin := newPinner(o.Pin)
	rep.Machine = machine(&o, pin)
	if err := pin.pinSelf(loadCPU); err != nil {
		return rep, err
	}

	dir, err := os.MkdirTemp("", "corralbench-")
	if err != nil {
		return rep, err
	}
	defer os.RemoveAll(dir)
	c := &cluster{o: &o, ps: &procs{pin: pin}, dir: dir, floorCmd: o.FloorCommand}
	defer c.close()

	o.logf("building cmd/gateway and cmd/mockllm from %s", o.SourceDir)
	if err := c.build(ctx); err != nil {
		return rep, err
	}
	if o.PprofDir != "" {
		if err := c.preparePprofDir(); err != nil {
			return rep, fmt.Errorf("pprof directory: %w", err)
		}
	}
	if err := c.startMock(ctx); err != nil {
		return rep, fmt.Errorf("mockllm: %w", err)
	}
	h := &harness{o: &o, c: c, rep: rep}
	for _, s := range AllScenarios {
		if !o.has(s) {
			continue
		}
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		o.logf("scenario %s", s)
		t0 := time.Now()
		if err := h.scenario(ctx, s); err != nil {
			if ctx.Err() != nil {
				return rep, err
			}
			o.logf("scenario %s failed: %v", s, err)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", s, err))
		}
		o.logf("scenario %s done in %.1fs", s, time.Since(t0).Seconds())
	}
	rep.Checks = checks(rep)
	writeChecks(o.Tables, rep)
	return rep, nil
}

// harness runs the scenarios against one cluster.
type harness struct {
	o   *Options
	c   *cluster
	rep *Report
	// Long-lived gateways and the floor proxy, started on first use.
	floor, gwEmbedded *proc
	gwRedis           []*proc
}

func (h *harness) scenario(ctx context.Context, s string) error {
	switch s {
	case ScenarioOverhead:
		return h.overhead(ctx)
	case ScenarioHit:
		return h.hit(ctx)
	case ScenarioStampede:
		return h.stampede(ctx)
	case ScenarioStreaming:
		return h.streaming(ctx)
	case ScenarioFootprint:
		return h.footprint(ctx)
	case ScenarioTenantHit:
		return h.tenantHit(ctx)
	}
	return fmt.Errorf("unknown scenario %q", s)
}

// floorProxy returns the shared floor proxy, starting it on first use.
func (h *harness) floorProxy(ctx context.Context) (*proc, error) {
	if h.floor == nil {
		p, err := h.c.startFloor(ctx, "floor")
		if err != nil {
			return nil, fmt.Errorf("floor proxy: %w", err)
		}
		h.floor = p
	}
	return h.floor, nil
}

// embedded returns the shared embedded-mode gateway.
func (h *harness) embedded(ctx context.Context) (*proc, error) {
	if h.gwEmbedded == nil {
		p, err := h.c.startGateway(ctx, "corral-embedded", false)
		if err != nil {
			return nil, fmt.Errorf("gateway (embedded): %w", err)
		}
		h.gwEmbedded = p
	}
	return h.gwEmbedded, nil
}

// redisGateways returns n shared Redis-mode gateways (and Redis), starting
// what is missing.
func (h *harness) redisGateways(ctx context.Context, n int) ([]*proc, error) {
	if h.c.redis == nil {
		if err := h.c.startRedis(ctx); err != nil {
			return nil, err
		}
		h.rep.Machine.Redis = redisVersion()
	}
	for len(h.gwRedis) < n {
		name := "corral-redis"
		if i := len(h.gwRedis); i > 0 {
			name = fmt.Sprintf("corral-redis-%d", i+1)
		}
		p, err := h.c.startGateway(ctx, name, true)
		if err != nil {
			return nil, fmt.Errorf("gateway (redis): %w", err)
		}
		h.gwRedis = append(h.gwRedis, p)
	}
	return h.gwRedis[:n], nil
}

// moduleRoot finds the directory of the corral go.mod at or above the
// working directory.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(b, []byte("module github.com/corralhq/corral\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("corral's go.mod not found above the working directory; run from the repository or pass -src")
		}
		dir = parent
	}
}

// RaiseNoFile raises the soft open-files limit to the hard one, so the
// harness and the children it starts (they inherit it) can hold the
// footprint scenario's thousands of connections.
func RaiseNoFile() (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, err
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, err
		}
	}
	return rl.Cur, nil
}

func machine(o *Options, pin *pinner) Machine {
	m := Machine{
		NumCPU:    runtime.NumCPU(),
		GoVersion: runtime.Version(),
		Pinned:    pin.enabled(),
		PinReason: pin.reason,
		ProxyCPU:  proxyCPU,
		LoadCPU:   loadCPU,
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimLeft(v, " \t:"))
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if out, err := exec.Command("git", "-C", o.SourceDir, "rev-parse", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
		st, _ := exec.Command("git", "-C", o.SourceDir, "status", "--porcelain", "--untracked-files=no").Output()
		m.Dirty = len(bytes.TrimSpace(st)) > 0
	}
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) == nil {
		m.NoFile = rl.Cur
	}
	return m
}

func redisVersion() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return ""
	}
	for f := range strings.FieldsSeq(string(out)) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return strings.TrimSpace(string(out))
}

// WriteJSON writes r to path, creating its directory.
func WriteJSON(path string, r *Report) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
