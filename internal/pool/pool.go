// Package pool chooses which upstream serves a request when Corral has
// several: routing by API and model glob, priority tiers, a weighted
// random order within a tier, and each upstream's passive health (a
// cooldown after a 429 that said when to come back, a circuit that opens
// after consecutive failures and lets one probe through when it half-opens).
//
// The upstreams are shared by every tenant, so one tenant must not be able
// to hold a circuit open for all the others. A connection error, a 5xx or
// a 429 without Retry-After is the upstream's doing and counts toward the
// circuit whoever sent the call. A timeout may be the request's own doing
// (a long generation, a huge max_tokens): timeouts count only once they
// are not all one tenant's since the last success, so one tenant's slow
// requests cost that tenant its own time and nobody else an open circuit.
//
// It decides and remembers; it does not call anyone. The failover loop
// that walks the candidates lives with the upstream client. Health is
// each instance's own passive view: nothing here talks to Redis or to
// the upstreams, so a pick costs a few hundred nanoseconds.
package pool

import (
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"sync"
	"time"
)

// Defaults of the passive health rules.
const (
	// FailuresToOpen consecutive failures open an upstream's circuit.
	FailuresToOpen = 5
	// OpenFor is how long an open circuit refuses traffic before one probe.
	OpenFor = 30 * time.Second
	// MaxCooldown caps a Retry-After cooldown.
	MaxCooldown = 60 * time.Second
)

// Member is one upstream as the pool sees it.
type Member struct {
	// Name is the upstream's unique name.
	Name string
	// API is "openai" or "anthropic".
	API string
	// Provider runs it: openai, anthropic, azure, bedrock or vertex ("" is
	// the API's own).
	Provider string
	// Models are globs (path.Match syntax) of the models it serves; nil
	// serves every model.
	Models []string
	// Aliases are the keys of its aliases (client model globs mapped to
	// the provider's ids), in the file's order: with Models, the names a
	// client may send it (GET /v1/models lists those without globs).
	Aliases []string
	// Priority: lower tiers are tried first.
	Priority int
	// Weight is its share of traffic within its tier (≥ 1).
	Weight int

	mu       sync.Mutex // protects the health fields below
	run      run        // the failures since the last success (or since the circuit opened)
	openTill time.Time  // circuit open until then (zero: closed)
	probing  bool       // a half-open probe is in flight
	coolTill time.Time  // cooling down until then

	calls   int64         // attempts observed (Observe), for the console
	failed  int64         // of which failed (error, timeout, retry status)
	latency time.Duration // moving average of the attempts' time to answer headers
	lastErr time.Time     // when an attempt last failed
}

// run is the evidence against a member since its last success, or since
// its circuit last opened (a half-open circuit is judged afresh).
type run struct {
	failures int    // connection errors, 5xx, 429s without Retry-After: always counted
	timeouts int    // timeouts: counted only once mixed
	tenant   string // the tenant of the run's timeouts while they are all one tenant's
	mixed    bool   // the run's timeouts are not all one tenant's
}

// counted is how many of the run's failures count toward the circuit.
func (r run) counted() int {
	if r.mixed {
		return r.failures + r.timeouts
	}
	return r.failures
}

// timedOut adds a timeout of tenant's call to the run. A call whose
// tenant is unknown ("") may be anyone's, so its timeout counts.
func (r *run) timedOut(tenant string) {
	switch {
	case tenant == "":
		r.mixed = true
	case r.timeouts == 0:
		r.tenant = tenant
	case tenant != r.tenant:
		r.mixed = true
	}
	r.timeouts++
}

// Serves reports whether m serves model on api. A request that names no
// model (a file upload, a list) may go to any upstream of its API.
func (m *Member) Serves(api, model string) bool {
	if m.API != api {
		return false
	}
	if m.Models == nil || model == "" {
		return true
	}
	for _, g := range m.Models {
		if ok, _ := path.Match(g, model); ok {
			return true
		}
	}
	return false
}

// State is a member's health as metrics show it.
type State int

const (
	// Closed: healthy, serving.
	Closed State = iota
	// Cooling: resting after a 429 with Retry-After.
	Cooling
	// Open: the circuit refuses traffic.
	Open
	// HalfOpen: the open period is over; one probe may go.
	HalfOpen
)

func (s State) String() string {
	return [...]string{"closed", "cooling", "open", "half_open"}[s]
}

// State returns m's health at now.
func (m *Member) State(now time.Time) State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.stateLocked(now)
}

func (m *Member) stateLocked(now time.Time) State {
	switch {
	case !m.openTill.IsZero() && now.Before(m.openTill):
		return Open
	case !m.openTill.IsZero():
		return HalfOpen
	case now.Before(m.coolTill):
		return Cooling
	}
	return Closed
}

// Outcome is what one call to a member came to, for its health.
type Outcome int

const (
	// Success: an answer (any status that is not a failover trigger).
	Success Outcome = iota
	// Failure: a connection error, 500, 502, 503, 504, 529, or a 429
	// without Retry-After: the upstream's doing, whoever called.
	Failure
	// Timeout: no headers within the call's time. The upstream may be ill,
	// or the request merely long: it counts only alongside other tenants'
	// timeouts (see the package doc).
	Timeout
	// Abandoned: the call ended for a reason that says nothing about the
	// upstream (the client left); a probe slot is freed, nothing counted.
	Abandoned
	// Refused: the upstream refused Corral's credentials (401, 403). An
	// expired role or a revoked key refuses every tenant's calls; one
	// tenant naming a model Corral's account may not use (Bedrock's
	// AccessDenied) refuses only that tenant's. So it counts as a timeout
	// does: only once the run's refusals and timeouts are not all one
	// tenant's, and one tenant cannot open a circuit every tenant shares.
	Refused
)

// Pool is a set of members. It is immutable once built: a reload builds a
// new pool (and Carry moves health across).
type Pool struct {
	members []*Member
	now     func() time.Time

	mu  sync.Mutex // protects rng
	rng *rand.Rand
}

// Options configure a pool.
type Options struct {
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Seed fixes the weighted order's randomness (tests); 0 seeds from
	// the runtime.
	Seed uint64
}

// New builds a pool of members.
func New(members []*Member, o Options) *Pool {
	p := &Pool{members: members, now: o.Now}
	if p.now == nil {
		p.now = time.Now
	}
	seed := o.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	p.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	return p
}

// Members returns the pool's members in their configured order.
func (p *Pool) Members() []*Member { return p.members }

// Member returns the member called name, or nil.
func (p *Pool) Member(name string) *Member {
	for _, m := range p.members {
		if m.Name == name {
			return m
		}
	}
	return nil
}

// Candidates returns, in the order to try them, the members that serve
// model on api and may take a call now: lowest priority first, and within
// a tier a weighted random order (each member's chance to go first is its
// share of the tier's weight). Cooling members, open circuits and
// half-open circuits whose probe is already out are left out. The caller
// calls Acquire just before it calls a candidate, and Record after.
// Matched reports whether any member serves the model at all, so a caller
// can tell "no such model" (404) from "nobody can take it now".
func (p *Pool) Candidates(api, model string) (out []*Member, matched bool) {
	now := p.now()
	type keyed struct {
		m   *Member
		key float64
	}
	var ks []keyed
	for _, m := range p.members {
		if !m.Serves(api, model) {
			continue
		}
		matched = true
		if !m.available(now) {
			continue
		}
		// Efraimidis–Spirakis: sorting by u^(1/w) descending draws a
		// weighted order without replacement.
		p.mu.Lock()
		u := p.rng.Float64()
		p.mu.Unlock()
		ks = append(ks, keyed{m, math.Pow(u, 1/float64(max(m.Weight, 1)))})
	}
	slices.SortStableFunc(ks, func(a, b keyed) int {
		if a.m.Priority != b.m.Priority {
			return a.m.Priority - b.m.Priority
		}
		switch {
		case a.key > b.key:
			return -1
		case a.key < b.key:
			return 1
		}
		return 0
	})
	out = make([]*Member, len(ks))
	for i, k := range ks {
		out[i] = k.m
	}
	return out, matched
}

// CanTake reports whether a call for model on api would find a member to
// take it now: false when none serves the model, or every one that does
// is cooling down or has its circuit open.
func (p *Pool) CanTake(api, model string) bool {
	now := p.now()
	for _, m := range p.members {
		if m.Serves(api, model) && m.available(now) {
			return true
		}
	}
	return false
}

// available reports whether m could take a call now.
func (m *Member) available(now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.admitsLocked(now)
	return ok
}

// admitsLocked reports whether m may take a call at now (not open, not
// cooling, and a half-open circuit's one probe not yet out), and whether
// that call would be the half-open probe.
func (m *Member) admitsLocked(now time.Time) (probe, ok bool) {
	switch m.stateLocked(now) {
	case Open, Cooling:
		return false, false
	case HalfOpen:
		return true, !m.probing
	}
	return false, true
}

// Acquire is called just before a call to m: it reports whether m may
// still take it, and claims the one probe of a half-open circuit (so a
// candidate never tried holds no slot). Every Acquire that returns true is
// followed by one Record.
func (p *Pool) Acquire(m *Member) bool {
	now := p.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	probe, ok := m.admitsLocked(now)
	if probe && ok {
		m.probing = true
	}
	return ok
}

// Call is what one call to a member tells its health.
type Call struct {
	Outcome Outcome
	// Tenant is whose call it was: timeouts that are all one tenant's do
	// not open the circuit. "" (unknown) counts as anyone's.
	Tenant string
	// Pinned: the call went to m by name, past Acquire (a follow-up on an
	// object only m holds). It holds no probe slot, and its success does
	// not close an open or half-open circuit: only the probe does, so a
	// stream of follow-ups cannot reopen an upstream to every request.
	Pinned bool
}

// Record notes the outcome of a call to m: one that Acquire admitted, or a
// pinned one. A success closes the circuit; FailuresToOpen counted
// failures in a row open it for OpenFor, and so does a failed probe whose
// failure counts (a probe's lone timeout only frees the probe slot, unless
// another tenant's timed out since the circuit opened).
func (p *Pool) Record(m *Member, c Call) {
	if p == nil {
		return
	}
	now := p.now()
	m.mu.Lock()
	defer m.mu.Unlock()
	wasProbe := false
	if !c.Pinned {
		wasProbe = m.probing
		m.probing = false
	}
	switch c.Outcome {
	case Success:
		if c.Pinned && !m.openTill.IsZero() {
			return
		}
		m.run, m.openTill = run{}, time.Time{}
		return
	case Failure:
		m.run.failures++
	case Timeout, Refused:
		m.run.timedOut(c.Tenant)
		if !m.run.mixed {
			return
		}
	default:
		return
	}
	if wasProbe || m.run.counted() >= FailuresToOpen {
		m.run, m.openTill = run{}, now.Add(OpenFor)
	}
}

// CoolDown rests m for d (at most MaxCooldown) after a 429 that said when
// to retry; a cooldown does not count toward the circuit. It leaves the
// probe slot alone: the call's own Record frees it when that call held it
// (a pinned call never does, and must not free another call's probe).
func (p *Pool) CoolDown(m *Member, d time.Duration) {
	if p == nil {
		return
	}
	d = min(d, MaxCooldown)
	if d <= 0 {
		return
	}
	until := p.now().Add(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	if until.After(m.coolTill) {
		m.coolTill = until
	}
}

// Carry moves health from an old pool's members to this pool's members of
// the same name, so a reload does not reopen every circuit's count.
func (p *Pool) Carry(old *Pool) {
	if old == nil {
		return
	}
	for _, m := range p.members {
		o := old.Member(m.Name)
		if o == nil {
			continue
		}
		o.mu.Lock()
		r, openTill, coolTill := o.run, o.openTill, o.coolTill
		calls, failed, latency, lastErr := o.calls, o.failed, o.latency, o.lastErr
		o.mu.Unlock()
		m.mu.Lock()
		m.run, m.openTill, m.coolTill = r, openTill, coolTill
		m.calls, m.failed, m.latency, m.lastErr = calls, failed, latency, lastErr
		m.mu.Unlock()
	}
}

// latencyWeight is the share of the newest attempt in a member's moving
// average latency: 1/8, so one slow call moves it an eighth of the way.
const latencyWeight = 8

// Observe notes one attempt's time and whether it failed, for Snapshot.
// It is separate from Record, which only a pool that keeps health is
// fed: a lone upstream keeps no circuit, but its latency still shows.
func (m *Member) Observe(d time.Duration, failed bool, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls++
	if failed {
		m.failed++
		m.lastErr = now
	}
	if m.calls == 1 {
		m.latency = d
	} else {
		m.latency += (d - m.latency) / latencyWeight
	}
}

// Snapshot is a member's health and traffic at one moment, read-only:
// what an operator's page shows.
type Snapshot struct {
	Name string
	API  string
	// Provider is who runs it (ProviderName): openai, anthropic, azure,
	// bedrock or vertex.
	Provider string
	Priority int
	Weight   int
	State    State
	// OpenUntil is when an open circuit lets its probe through (zero:
	// closed); CoolingUntil when a cooldown ends (zero or past: none).
	OpenUntil    time.Time
	CoolingUntil time.Time
	// Failures is the run of failures counting toward the circuit now.
	Failures int
	// Calls and Failed count the attempts observed since start (or since
	// the member was added), LastFailure is when one last failed.
	Calls       int64
	Failed      int64
	LastFailure time.Time
	// Latency is the moving average time of an attempt (0: none yet).
	Latency time.Duration
}

// Snapshot returns m's state at now.
func (m *Member) Snapshot(now time.Time) Snapshot {
	m.mu.Lock()
	defer m.mu.Unlock()
	sn := Snapshot{Name: m.Name, API: m.API, Provider: m.ProviderName(), Priority: m.Priority, Weight: m.Weight, State: m.stateLocked(now),
		OpenUntil: m.openTill, Failures: m.run.counted(), Calls: m.calls, Failed: m.failed, LastFailure: m.lastErr, Latency: m.latency}
	if now.Before(m.coolTill) {
		sn.CoolingUntil = m.coolTill
	}
	return sn
}

// Snapshot returns every member's state now, in the configured order.
func (p *Pool) Snapshot() []Snapshot {
	now := p.now()
	out := make([]Snapshot, len(p.members))
	for i, m := range p.members {
		out[i] = m.Snapshot(now)
	}
	return out
}
