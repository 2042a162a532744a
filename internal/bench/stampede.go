package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"
)

// StampedeGroup is one configuration and burst size of the stampede
// scenario.
type StampedeGroup struct {
	Config    string `json:"config"`
	Instances int    `json:"instances"`
	Redis     bool   `json:"redis"`
	Size      int    `json:"burst_size"`
	// MockLatencyMS is the upstream latency: long enough that the whole
	// burst has arrived and waits when the leader's answer comes.
	MockLatencyMS int `json:"mock_latency_ms"`

	// UpstreamCalls are the mock's requests per burst; ExactlyOne is true
	// when every burst made exactly one.
	UpstreamCalls Spread `json:"upstream_calls_per_burst"`
	ExactlyOne    bool   `json:"exactly_one"`
	// Answers by X-Corral-Cache over all bursts, plus errors.
	Answers map[string]int `json:"answers"`
	// LastWaiter is, per burst, the time from the client receiving the
	// MISS (leader) answer to the client receiving the last answer of the
	// burst: the leader's store, the wake-up of every waiter and the
	// writing of every answer. Waiters are every other request of the
	// burst; CrossWaiters those sent to an instance other than the
	// leader's (they wake through Redis, not in-process).
	LastWaiter   Summary `json:"last_waiter"`
	Waiters      Summary `json:"waiters"`
	CrossWaiters Summary `json:"cross_instance_waiters"`
	// Span is, per burst, the time from sending the first request to the
	// last answer.
	Span   Summary       `json:"span"`
	Bursts []BurstResult `json:"bursts"`
}

// BurstResult is one burst.
type BurstResult struct {
	UpstreamCalls  int64          `json:"upstream_calls"`
	LeaderInstance int            `json:"leader_instance"`
	LastWaiterMS   float64        `json:"last_waiter_ms"`
	SpanMS         float64        `json:"span_ms"`
	Answers        map[string]int `json:"answers"`
	FirstError     string         `json:"first_error,omitempty"`
}

// stampedeConfig is a set of gateways a burst is spread over, round robin.
type stampedeConfig struct {
	name  string
	redis bool
	gws   []*proc
	c     *http.Client
}

// stampedeLatency is the mock latency for a burst of size: 50 ms, or a
// quarter of a millisecond per request for big bursts, so that every
// request of the burst has reached a gateway before the upstream answers.
func stampedeLatency(size int) int { return max(50, size/4) }

// stampede is scenario 3: bursts of identical requests (a new prompt per
// burst) over one embedded gateway, one Redis-mode gateway and three
// Redis-mode gateways sharing Redis. Bursts of the configurations
// alternate. The first burst of each configuration and size opens the
// connections and is not recorded.
func (h *harness) stampede(ctx context.Context) error {
	gw, err := h.embedded(ctx)
	if err != nil {
		return err
	}
	cfgs := []*stampedeConfig{{name: "embedded ×1", gws: []*proc{gw}}}
	if rg, err := h.redisGateways(ctx, 3); err != nil {
		h.o.logf("Redis mode skipped: %v", err)
		h.rep.Errors = append(h.rep.Errors, "stampede, redis mode: "+err.Error())
	} else {
		cfgs = append(cfgs,
			&stampedeConfig{name: "redis ×1", redis: true, gws: rg[:1]},
			&stampedeConfig{name: "redis ×3", redis: true, gws: rg})
	}
	hdr := benchHeader("")
	nonce := time.Now().UnixNano()
	for _, size := range h.o.StampedeSizes {
		lat := stampedeLatency(size)
		groups := make([]StampedeGroup, len(cfgs))
		waits := make([]waits, len(cfgs))
		for i, cfg := range cfgs {
			cfg.c = newClient(size)
			groups[i] = StampedeGroup{Config: cfg.name, Instances: len(cfg.gws), Redis: cfg.redis, Size: size, MockLatencyMS: lat, ExactlyOne: true, Answers: map[string]int{}}
		}
		for round := -1; round < h.o.StampedeBursts; round++ { // round -1 warms up
			for k := range cfgs {
				i := (max(round, 0) + k) % len(cfgs)
				cfg := cfgs[i]
				body := chatBody(fmt.Sprintf("stampede %d %s size %d burst %d", nonce, cfg.name, size, round), false, mockControl{LatencyMS: lat})
				b, wt, err := h.burst(ctx, cfg, hdr, body, size)
				if err != nil {
					return err
				}
				if round >= 0 {
					groups[i].Bursts = append(groups[i].Bursts, b)
					waits[i].all = append(waits[i].all, wt.all...)
					waits[i].cross = append(waits[i].cross, wt.cross...)
					h.o.logf("  stampede | %s | burst %d of %d/%d | upstream calls %d, MISS→last %.2f ms, answers %v",
						cfg.name, size, round+1, h.o.StampedeBursts, b.UpstreamCalls, b.LastWaiterMS, b.Answers)
				}
			}
		}
		for i, cfg := range cfgs {
			cfg.c.CloseIdleConnections()
			groups[i].finish(waits[i])
		}
		h.rep.Stampede = append(h.rep.Stampede, groups...)
	}
	writeStampede(h.o.Tables, h.rep.Stampede)
	return nil
}

// fire sends size requests at once, round robin over gws: each waits for
// one close, so they reach the gateways together, as a stampede does. It
// returns each answer with the instance it went to and the time it was
// whole, and the time the requests were let go.
func fire(ctx context.Context, gws []*proc, size int, send func(ctx context.Context, url string) answer) ([]timedAnswer, time.Time) {
	rctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	got := make([]timedAnswer, size)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range size {
		inst := i % len(gws)
		url := "http://" + gws[inst].addr + "/v1/chat/completions"
		wg.Go(func() {
			<-start
			a := send(rctx, url)
			got[i] = timedAnswer{answer: a, instance: inst, at: time.Now()}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return got, t0
}

// timedAnswer is one request of a burst.
type timedAnswer struct {
	answer
	instance int
	at       time.Time // when the client had the whole answer
}

// waits are the waiters' times from the MISS answer to their own.
type waits struct {
	all, cross []time.Duration // cross: sent to another instance than the leader's
}

// burst fires size identical requests at once, round robin over cfg's
// gateways, and measures them against the mock's request count.
func (h *harness) burst(ctx context.Context, cfg *stampedeConfig, hdr http.Header, body []byte, size int) (BurstResult, waits, error) {
	var wt waits
	before, err := h.c.mockRequests(ctx)
	if err != nil {
		return BurstResult{}, wt, err
	}
	got, t0 := fire(ctx, cfg.gws, size, func(ctx context.Context, url string) answer {
		return doRequest(ctx, cfg.c, url, hdr, body, false, nil)
	})
	after, err := h.c.mockRequests(ctx)
	if err != nil {
		return BurstResult{}, wt, err
	}

	b := BurstResult{UpstreamCalls: after - before, LeaderInstance: -1, Answers: map[string]int{}}
	leader := -1
	var last time.Time
	for i, a := range got {
		if a.at.After(last) {
			last = a.at
		}
		if !countAnswer(b.Answers, &b.FirstError, a.cache, a.err) {
			continue
		}
		if a.cache == "MISS" {
			leader = i
		}
	}
	b.SpanMS = ms(last.Sub(t0))
	if leader < 0 {
		return b, wt, nil
	}
	miss := got[leader]
	b.LeaderInstance = miss.instance
	b.LastWaiterMS = ms(max(last.Sub(miss.at), 0))
	for i, a := range got {
		if i == leader || a.err != nil {
			continue
		}
		// A waiter on the leader's instance may be answered a moment
		// before the leader's own client reads its answer: count it as 0.
		d := max(a.at.Sub(miss.at), 0)
		wt.all = append(wt.all, d)
		if a.instance != miss.instance {
			wt.cross = append(wt.cross, d)
		}
	}
	return b, wt, nil
}

// finish summarises the bursts of g and its waiters' times.
func (g *StampedeGroup) finish(wt waits) {
	calls := make([]float64, len(g.Bursts))
	var last, span []time.Duration
	for i, b := range g.Bursts {
		calls[i] = float64(b.UpstreamCalls)
		if b.UpstreamCalls != 1 {
			g.ExactlyOne = false
		}
		for k, n := range b.Answers {
			g.Answers[k] += n
		}
		if b.LeaderInstance >= 0 {
			last = append(last, time.Duration(b.LastWaiterMS*float64(time.Millisecond)))
		}
		span = append(span, time.Duration(b.SpanMS*float64(time.Millisecond)))
	}
	g.UpstreamCalls = spreadOf(calls)
	if len(g.Bursts) == 0 {
		g.ExactlyOne = false
	}
	g.LastWaiter = summarize(last)
	g.Span = summarize(span)
	g.Waiters = summarize(wt.all)
	g.CrossWaiters = summarize(wt.cross)
}

func writeStampede(w io.Writer, gs []StampedeGroup) {
	fmt.Fprintf(w, "\n## 3. Stampede: bursts of identical requests\n\n")
	fmt.Fprintf(w, "Times are measured at the client: from the MISS (leader) answer to each waiter's answer.\n\n")
	t := &table{head: []string{"config", "burst", "mock ms", "bursts", "upstream calls / burst", "answers", "MISS→last p50 ms", "MISS→last p99 ms", "waiter p50 ms", "waiter p99 ms", "other-instance waiter p99 ms", "burst span p50 ms"}}
	for _, g := range gs {
		cross := "–"
		if g.Instances > 1 {
			cross = msNum(g.CrossWaiters.P99)
		}
		t.add(g.Config, fmt.Sprint(g.Size), fmt.Sprint(g.MockLatencyMS), fmt.Sprint(len(g.Bursts)),
			fmtSpread(g.UpstreamCalls, func(v float64) string { return fmt.Sprintf("%g", v) }),
			fmtAnswers(g.Answers), msNum(g.LastWaiter.P50), msNum(g.LastWaiter.P99),
			msNum(g.Waiters.P50), msNum(g.Waiters.P99), cross, msNum(g.Span.P50))
	}
	t.write(w)
}

func fmtAnswers(m map[string]int) string {
	var parts []string
	for _, k := range []string{"MISS", "COALESCED", "HIT", "error"} {
		if m[k] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
	}
	for k, n := range m {
		switch k {
		case "MISS", "COALESCED", "HIT", "error":
		default:
			parts = append(parts, fmt.Sprintf("%q %d", k, n))
		}
	}
	return joinComma(parts)
}

func joinComma(s []string) string {
	out := ""
	for i, p := range s {
		if i > 0 {
			out += ", "
		}
		out += p
	}
	return out
}

// countAnswer counts one answer by its X-Corral-Cache value, or as "error"
// keeping the first error's text; it reports whether an answer came.
func countAnswer(answers map[string]int, firstErr *string, cache string, err error) bool {
	if err != nil {
		answers["error"]++
		if *firstErr == "" {
			*firstErr = err.Error()
		}
		return false
	}
	answers[cache]++
	return true
}
