package pool

import (
	"math"
	"sync"
	"testing"
	"time"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex // protects t
	t  time.Time
}

func (c *clock) now() time.Time          { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) advance(d time.Duration) { c.mu.Lock(); c.t = c.t.Add(d); c.mu.Unlock() }

func names(ms []*Member) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}

func TestCandidatesRouteByAPIModelAndPriority(t *testing.T) {
	p := New([]*Member{
		{Name: "azure", API: "openai", Models: []string{"gpt-4o*"}, Priority: 1, Weight: 1},
		{Name: "openai-a", API: "openai", Models: []string{"gpt-4o*", "o3"}, Priority: 0, Weight: 1},
		{Name: "vllm", API: "openai", Models: []string{"llama-*"}, Priority: 2, Weight: 1},
		{Name: "claude", API: "anthropic", Weight: 1},
	}, Options{Seed: 1})
	tests := []struct {
		api, model string
		want       []string
		matched    bool
	}{
		{"openai", "gpt-4o-mini", []string{"openai-a", "azure"}, true},
		{"openai", "o3", []string{"openai-a"}, true},
		{"openai", "llama-3-70b", []string{"vllm"}, true},
		{"openai", "o3-mini", nil, false},
		{"anthropic", "claude-sonnet-4-5", []string{"claude"}, true},
		{"anthropic", "gpt-4o", []string{"claude"}, true},           // no globs: every model
		{"openai", "", []string{"openai-a", "azure", "vllm"}, true}, // no model: any upstream of the API
	}
	for _, tt := range tests {
		got, matched := p.Candidates(tt.api, tt.model)
		if g := names(got); matched != tt.matched || len(g) != len(tt.want) || (len(g) > 0 && g[0] != tt.want[0]) {
			t.Errorf("Candidates(%s, %s) = %v, %v; want %v, %v", tt.api, tt.model, g, matched, tt.want, tt.matched)
		}
	}
}

func TestWeightedSplit(t *testing.T) {
	p := New([]*Member{
		{Name: "a", API: "openai", Weight: 3},
		{Name: "b", API: "openai", Weight: 1},
		{Name: "backup", API: "openai", Priority: 1, Weight: 100},
	}, Options{Seed: 42})
	first := map[string]int{}
	const n = 4000
	for range n {
		c, _ := p.Candidates("openai", "m")
		if len(c) != 3 || c[2].Name != "backup" {
			t.Fatalf("order %v: the lower tier must come last", names(c))
		}
		first[c[0].Name]++
	}
	if share := float64(first["a"]) / n; math.Abs(share-0.75) > 0.03 {
		t.Errorf("a went first %.3f of the time; want 0.75 ± 0.03 (%v)", share, first)
	}
}

func TestCircuitOpensAndProbes(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := &Member{Name: "a", API: "openai", Weight: 1}
	p := New([]*Member{m}, Options{Now: c.now, Seed: 1})
	for i := range FailuresToOpen {
		if !p.Acquire(m) {
			t.Fatalf("failure %d: refused before the circuit opened", i)
		}
		p.Record(m, Call{Outcome: Failure})
	}
	if got, _ := p.Candidates("openai", "m"); len(got) != 0 || m.State(c.now()) != Open {
		t.Fatalf("after %d failures: candidates %v state %v; want none, open", FailuresToOpen, names(got), m.State(c.now()))
	}
	c.advance(OpenFor - time.Second)
	if p.Acquire(m) {
		t.Fatal("admitted while open")
	}
	c.advance(time.Second)
	if got, _ := p.Candidates("openai", "m"); len(got) != 1 || m.State(c.now()) != HalfOpen {
		t.Fatalf("after %v: %v %v; want one half-open candidate", OpenFor, names(got), m.State(c.now()))
	}
	if !p.Acquire(m) {
		t.Fatal("the probe was refused")
	}
	if p.Acquire(m) {
		t.Fatal("a second probe was admitted while the first is out")
	}
	p.Record(m, Call{Outcome: Failure}) // the probe failed: open again
	if m.State(c.now()) != Open {
		t.Fatalf("after a failed probe: %v; want open", m.State(c.now()))
	}
	c.advance(OpenFor)
	if !p.Acquire(m) {
		t.Fatal("second probe refused")
	}
	p.Record(m, Call{Outcome: Success})
	if m.State(c.now()) != Closed {
		t.Fatalf("after a good probe: %v; want closed", m.State(c.now()))
	}
	// One failure after closing does not reopen it.
	p.Acquire(m)
	p.Record(m, Call{Outcome: Failure})
	if m.State(c.now()) != Closed {
		t.Fatalf("one failure after closing: %v", m.State(c.now()))
	}
}

// One tenant's slow requests, timing out one after another, are that
// tenant's own: they never open the circuit for the others. Once another
// tenant's call times out too, or a failure only the upstream causes
// comes, the timeouts count.
func TestTimeoutsOfOneTenantDoNotOpenTheCircuit(t *testing.T) {
	tests := []struct {
		name string
		give []Call
		want State
	}{
		{"one tenant's timeouts", repeat(Call{Outcome: Timeout, Tenant: "slow"}, 50), Closed},
		{"one tenant's timeouts and four failures", append(repeat(Call{Outcome: Timeout, Tenant: "slow"}, 50), repeat(Call{Outcome: Failure, Tenant: "slow"}, 4)...), Closed},
		{"two tenants' timeouts", append(repeat(Call{Outcome: Timeout, Tenant: "slow"}, 4), Call{Outcome: Timeout, Tenant: "other"}), Open},
		{"timeouts of unknown calls", repeat(Call{Outcome: Timeout}, FailuresToOpen), Open},
		{"failures from one tenant", repeat(Call{Outcome: Failure, Tenant: "a"}, FailuresToOpen), Open},
		{"failures from two tenants", append(repeat(Call{Outcome: Failure, Tenant: "a"}, 3), repeat(Call{Outcome: Failure, Tenant: "b"}, 2)...), Open},
		{"a success between", append(append(repeat(Call{Outcome: Timeout, Tenant: "a"}, 4), Call{Outcome: Success, Tenant: "b"}), Call{Outcome: Timeout, Tenant: "b"}), Closed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &clock{t: time.Unix(1000, 0)}
			m := &Member{Name: "a", API: "openai", Weight: 1}
			p := New([]*Member{m}, Options{Now: c.now, Seed: 1})
			for i, call := range tt.give {
				if !p.Acquire(m) {
					t.Fatalf("call %d refused", i)
				}
				p.Record(m, call)
			}
			if got := m.State(c.now()); got != tt.want {
				t.Errorf("state %v; want %v", got, tt.want)
			}
		})
	}
}

// A half-open circuit is closed by its probe only: a pinned follow-up's
// success (it bypasses the circuit) leaves it as it is, and a probe that
// timed out for one tenant frees the slot for the next probe rather than
// reopening the circuit.
func TestOnlyTheProbeClosesTheCircuit(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m := &Member{Name: "a", API: "openai", Weight: 1}
	p := New([]*Member{m}, Options{Now: c.now, Seed: 1})
	for range FailuresToOpen {
		p.Acquire(m)
		p.Record(m, Call{Outcome: Failure, Tenant: "a"})
	}
	p.Record(m, Call{Outcome: Success, Tenant: "b", Pinned: true})
	if got := m.State(c.now()); got != Open {
		t.Fatalf("after a pinned success: %v; want open", got)
	}
	c.advance(OpenFor)
	if !p.Acquire(m) {
		t.Fatal("the probe was refused")
	}
	p.Record(m, Call{Outcome: Success, Tenant: "b", Pinned: true}) // while the probe is out
	if got := m.State(c.now()); got != HalfOpen || p.Acquire(m) {
		t.Fatalf("a pinned success closed the circuit or freed the probe slot: %v", got)
	}
	p.Record(m, Call{Outcome: Timeout, Tenant: "slow"}) // the probe
	if got := m.State(c.now()); got != HalfOpen {
		t.Fatalf("after one tenant's probe timed out: %v; want still half-open", got)
	}
	if !p.Acquire(m) {
		t.Fatal("the slot was not freed for the next probe")
	}
	p.Record(m, Call{Outcome: Timeout, Tenant: "other"})
	if got := m.State(c.now()); got != Open {
		t.Fatalf("after two tenants' probes timed out: %v; want open", got)
	}
	c.advance(OpenFor)
	p.Acquire(m)
	p.Record(m, Call{Outcome: Success, Tenant: "b"})
	if got := m.State(c.now()); got != Closed {
		t.Fatalf("after a good probe: %v; want closed", got)
	}
}

func repeat(c Call, n int) []Call {
	out := make([]Call, n)
	for i := range out {
		out[i] = c
	}
	return out
}

// halfOpen is a one-member pool on clock c whose circuit has just turned
// half-open: opened by FailuresToOpen failures, then OpenFor later.
func halfOpen(c *clock) (*Member, *Pool) {
	m := &Member{Name: "a", API: "openai", Weight: 1}
	p := New([]*Member{m}, Options{Now: c.now, Seed: 1})
	for range FailuresToOpen {
		p.Acquire(m)
		p.Record(m, Call{Outcome: Failure})
	}
	c.advance(OpenFor)
	return m, p
}

func TestAbandonedProbeFreesTheSlot(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m, p := halfOpen(c)
	p.Acquire(m)
	p.Record(m, Call{Outcome: Abandoned})
	if !p.Acquire(m) {
		t.Fatal("an abandoned probe kept the slot")
	}
}

// TestPinnedCooldownKeepsTheProbe: a pinned call (it holds no probe
// slot) that gets a 429 with Retry-After while a half-open circuit's probe
// is out cools the member down, but does not free that probe's slot: once
// the cooldown ends, a second probe is not admitted beside the first.
func TestPinnedCooldownKeepsTheProbe(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	m, p := halfOpen(c)
	if !p.Acquire(m) { // the probe goes out
		t.Fatal("no probe admitted after OpenFor")
	}
	p.CoolDown(m, time.Second) // a pinned follow-up's 429, Retry-After: 1
	p.Record(m, Call{Outcome: Abandoned, Pinned: true})
	c.advance(time.Second)
	if p.Acquire(m) {
		t.Fatal("a second probe was admitted while the first is still out")
	}
	p.Record(m, Call{Outcome: Success}) // the probe answers
	if m.State(c.now()) != Closed || !p.Acquire(m) {
		t.Fatalf("after the probe's success: %v; want closed", m.State(c.now()))
	}
}

func TestCooldown(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	a, b := &Member{Name: "a", API: "openai", Weight: 1}, &Member{Name: "b", API: "openai", Priority: 1, Weight: 1}
	p := New([]*Member{a, b}, Options{Now: c.now, Seed: 1})
	p.CoolDown(a, 10*time.Minute) // capped at MaxCooldown
	if got, _ := p.Candidates("openai", "m"); len(got) != 1 || got[0] != b {
		t.Fatalf("while a cools down: %v; want [b]", names(got))
	}
	c.advance(MaxCooldown - time.Millisecond)
	if a.State(c.now()) != Cooling {
		t.Fatalf("state %v; want cooling", a.State(c.now()))
	}
	c.advance(time.Millisecond)
	if got, _ := p.Candidates("openai", "m"); len(got) != 2 || got[0] != a {
		t.Fatalf("after the cooldown: %v; want [a b]", names(got))
	}
	if a.run.counted() != 0 {
		t.Fatal("a cooldown counted toward the circuit")
	}
}

func TestCarryKeepsHealthAcrossReload(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	old := New([]*Member{{Name: "a", API: "openai", Weight: 1}}, Options{Now: c.now})
	for range FailuresToOpen {
		old.Acquire(old.members[0])
		old.Record(old.members[0], Call{Outcome: Failure})
	}
	nu := New([]*Member{{Name: "a", API: "openai", Weight: 2}, {Name: "new", API: "openai", Weight: 1}}, Options{Now: c.now})
	nu.Carry(old)
	if nu.Member("a").State(c.now()) != Open || nu.Member("new").State(c.now()) != Closed {
		t.Fatal("health did not carry over by name")
	}
}

// BenchmarkCandidates is the routing decision's cost per request.
func BenchmarkCandidates(b *testing.B) {
	p := New([]*Member{
		{Name: "openai-a", API: "openai", Models: []string{"gpt-4o*", "o3"}, Weight: 2},
		{Name: "openai-b", API: "openai", Models: []string{"gpt-4o*", "o3"}, Weight: 1},
		{Name: "azure", API: "openai", Models: []string{"gpt-4o*"}, Priority: 1, Weight: 1},
		{Name: "vllm", API: "openai", Models: []string{"llama-*", "qwen-*"}, Weight: 1},
	}, Options{})
	b.ReportAllocs()
	for b.Loop() {
		if c, _ := p.Candidates("openai", "gpt-4o-mini"); len(c) != 3 {
			b.Fatal(len(c))
		}
	}
}

// TestSnapshot: a snapshot shows the state, the run toward the circuit,
// the attempts observed and their moving average latency.
func TestSnapshot(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	m := &Member{Name: "a", API: "openai", Weight: 1}
	p := New([]*Member{m}, Options{Now: func() time.Time { return now }})
	m.Observe(800*time.Millisecond, false, now)
	m.Observe(0, true, now)
	p.Record(m, Call{Outcome: Failure})
	got := p.Snapshot()[0]
	if got.State != Closed || got.Failures != 1 || got.Calls != 2 || got.Failed != 1 || !got.LastFailure.Equal(now) {
		t.Errorf("snapshot = %+v; want closed, 1 failure in the run, 2 calls, 1 failed", got)
	}
	if want := 700 * time.Millisecond; got.Latency != want {
		t.Errorf("latency = %v; want %v (800ms, then an eighth of the way to 0)", got.Latency, want)
	}
	for range FailuresToOpen {
		p.Record(m, Call{Outcome: Failure})
	}
	if got := p.Snapshot()[0]; got.State != Open || !got.OpenUntil.Equal(now.Add(OpenFor)) {
		t.Errorf("after %d failures: %+v; want open until %v", FailuresToOpen, got, now.Add(OpenFor))
	}
}

// TestSnapshotProvider: a snapshot names who runs the upstream, and an
// upstream configured without a provider (the lone default, the demo's
// mock) is its API's own.
func TestSnapshotProvider(t *testing.T) {
	tests := []struct {
		give *Member
		want string
	}{
		{give: &Member{Name: "a", API: "anthropic", Provider: "bedrock", Weight: 1}, want: "bedrock"},
		{give: &Member{Name: "b", API: "openai", Provider: "azure", Weight: 1}, want: "azure"},
		{give: &Member{Name: "c", API: "anthropic", Weight: 1}, want: "anthropic"},
		{give: &Member{Name: "d", API: "openai", Weight: 1}, want: "openai"},
	}
	for _, tt := range tests {
		if got := New([]*Member{tt.give}, Options{}).Snapshot()[0]; got.Provider != tt.want || got.API != tt.give.API {
			t.Errorf("%s: snapshot provider %q api %q; want %q %q", tt.give.Name, got.Provider, got.API, tt.want, tt.give.API)
		}
	}
}
