package bench

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// table is a markdown table.
type table struct {
	head []string
	rows [][]string
	left bool // left-align every column (text), else numbers right
}

func (t *table) add(cells ...string) { t.rows = append(t.rows, cells) }

func (t *table) write(w io.Writer) {
	line := func(cells []string) { fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | ")) }
	line(t.head)
	sep := make([]string, len(t.head))
	for i := range sep {
		sep[i] = "---:"
		if i == 0 || t.left {
			sep[i] = "---"
		}
	}
	line(sep)
	for _, r := range t.rows {
		line(r)
	}
}

// groupCases lists the cases of gs in order of first appearance.
func groupCases(gs []Group) []string {
	var out []string
	for _, g := range gs {
		if len(out) == 0 || out[len(out)-1] != g.Case {
			out = append(out, g.Case)
		}
	}
	return out
}

// fmtSpread prints "median (min–max)" with f for each number.
func fmtSpread(s Spread, f func(float64) string) string {
	if s.N == 0 {
		return "–"
	}
	if s.N == 1 || s.Min == s.Max {
		return f(s.Median)
	}
	return fmt.Sprintf("%s (%s–%s)", f(s.Median), f(s.Min), f(s.Max))
}

func fmtRate(s Spread) string { return fmtSpread(s, thousands) }
func fmtMS(s Spread) string   { return fmtSpread(s, msNum) }
func fmtCores(s Spread) string {
	return fmtSpread(s, func(v float64) string { return fmt.Sprintf("%.2f", v) })
}

func fmtUS(s Spread) string {
	return fmtSpread(s, func(v float64) string { return fmt.Sprintf("%.1f", v) })
}

// thousands prints v rounded, with thousands separators: 12,345.
func thousands(v float64) string {
	s := fmt.Sprintf("%.0f", math.Round(v))
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// msNum prints milliseconds with precision suited to their size.
func msNum(v float64) string {
	switch a := math.Abs(v); {
	case a < 10:
		return fmt.Sprintf("%.3f", v)
	case a < 100:
		return fmt.Sprintf("%.2f", v)
	default:
		return fmt.Sprintf("%.1f", v)
	}
}

func signedMS(v float64) string {
	if v >= 0 {
		return "+" + msNum(v)
	}
	return msNum(v)
}

// fmtDelta prints g's paired difference from base, "" for base itself.
func fmtDelta(base, g *Group, f func(RunResult) float64) string {
	if base == nil || base == g {
		return ""
	}
	return fmtSpread(paired(g, base, f, delta), signedMS)
}

// fmtRatio prints g's paired ratio to base, "" for base itself.
func fmtRatio(g, base *Group, f func(RunResult) float64) string {
	if base == nil || base == g {
		return ""
	}
	return fmtSpread(paired(g, base, f, ratio), func(v float64) string { return fmt.Sprintf("%.2f×", v) })
}

func fmtErrors(g *Group) string {
	if g.Unexpected == 0 {
		return fmt.Sprint(g.Errors)
	}
	return fmt.Sprintf("%d / %d", g.Errors, g.Unexpected)
}

// Check is one of the targets as measured.
type Check struct {
	Name   string `json:"name"`
	Target string `json:"target"`
	Value  string `json:"value"`
	// Status is PASS, MISS, INFO (reported, no target) or N/A (not
	// measured in this run).
	Status string `json:"status"`
	Detail string `json:"detail,omitempty"`
}

func passIf(ok bool) string {
	if ok {
		return "PASS"
	}
	return "MISS"
}

// checks evaluates the targets on what the report holds. Ratios
// are medians of per-repetition ratios of back-to-back runs.
func checks(r *Report) []Check {
	var cs []Check
	na := func(name, target string) {
		cs = append(cs, Check{Name: name, Target: target, Status: "N/A", Value: "not measured"})
	}

	// Upstream path, embedded and Redis mode.
	c32, c1 := overheadCase(0, 32), overheadCase(0, 1)
	for _, mode := range []struct{ target, label, status string }{
		{"corral-embedded", "embedded", ""},
		{"corral-redis", "Redis mode", "INFO"},
	} {
		floor, gw := findGroup(r.Overhead, c32, "floor"), findGroup(r.Overhead, c32, mode.target)
		name := "Upstream path, " + mode.label + ": throughput / floor at 32 conns"
		if floor == nil || gw == nil {
			na(name, "≥ 0.75×")
		} else {
			s := paired(gw, floor, throughputOf, ratio)
			st := passIf(s.Median >= 0.75)
			detail := ""
			if s.Median < 0.75 {
				detail = fmt.Sprintf("short by %.2f× (%.0f %% below the target)", 0.75-s.Median, (0.75-s.Median)/0.75*100)
			}
			if mode.status != "" {
				st, detail = mode.status, "no target for Redis mode; same code path as embedded with no-store"
			}
			cs = append(cs, Check{Name: name, Target: "≥ 0.75×", Status: st, Detail: detail,
				Value: fmtSpread(s, func(v float64) string { return fmt.Sprintf("%.2f×", v) }) +
					fmt.Sprintf(" (%s vs %s req/s)", thousands(gw.Throughput.Median), thousands(floor.Throughput.Median))})
		}
		if floor != nil && gw != nil && mode.status == "" {
			cs = append(cs, cpuCheck("Upstream path, embedded: proxy CPU per request / floor's, 32 conns", gw, floor))
		}
		floor, gw = findGroup(r.Overhead, c1, "floor"), findGroup(r.Overhead, c1, mode.target)
		name = "Upstream path, " + mode.label + ": p50 added over the floor at 1 conn"
		if floor == nil || gw == nil {
			na(name, "≤ +0.1 ms")
		} else {
			s := paired(gw, floor, p50Of, delta)
			st := passIf(s.Median <= 0.1)
			detail := ""
			if s.Median > 0.1 {
				detail = fmt.Sprintf("over by %.3f ms", s.Median-0.1)
			}
			if mode.status != "" {
				st, detail = mode.status, "no target for Redis mode"
			}
			cs = append(cs, Check{Name: name, Target: "≤ +0.1 ms", Status: st, Detail: detail,
				Value: fmtSpread(s, signedMS) + " ms" + fmt.Sprintf(" (p50 %s vs %s ms)", msNum(gw.P50.Median), msNum(floor.P50.Median))})
		}
	}

	// Hit path.
	for _, hit := range []struct {
		target, label string
		want          float64
	}{{"corral-memory-hit", "memory", 1.5}, {"corral-redis-hit", "Redis", 1.0}} {
		floor, gw := findGroup(r.Hit, hitCase(), "floor"), findGroup(r.Hit, hitCase(), hit.target)
		name := "Hit path, " + hit.label + ": throughput / floor"
		tgt := fmt.Sprintf("≥ %.1f×", hit.want)
		if floor == nil || gw == nil {
			na(name, tgt)
			continue
		}
		s := paired(gw, floor, throughputOf, ratio)
		detail := ""
		if s.Median < hit.want {
			detail = fmt.Sprintf("short by %.2f× (%.0f %% below the target)", hit.want-s.Median, (hit.want-s.Median)/hit.want*100)
		}
		cs = append(cs, Check{Name: name, Target: tgt, Status: passIf(s.Median >= hit.want), Detail: detail,
			Value: fmtSpread(s, func(v float64) string { return fmt.Sprintf("%.2f×", v) }) +
				fmt.Sprintf(" (%s vs %s req/s)", thousands(gw.Throughput.Median), thousands(floor.Throughput.Median))})
		cs = append(cs, cpuCheck("Hit path, "+hit.label+": proxy CPU per request / floor's", gw, floor))
		if gw.Redis != nil {
			reads, cmds := gw.Redis[readsKey], gw.Redis["total"]
			cs = append(cs, Check{Name: "Hit path, Redis: round trips per hit", Target: "1",
				Status: passIf(reads.Median <= 1.05),
				Value:  fmt.Sprintf("%.2f socket reads, %.2f commands per hit", reads.Median, cmds.Median),
				Detail: "socket reads at Redis ≈ round trips (a pipeline is one read); commands count each pipelined command"})
		}
	}

	// Stampede.
	if len(r.Stampede) == 0 {
		na("Stampede: upstream calls per burst", "exactly 1")
	}
	for _, g := range r.Stampede {
		cs = append(cs, Check{Name: fmt.Sprintf("Stampede %s, burst %d: upstream calls per burst", g.Config, g.Size), Target: "exactly 1",
			Status: passIf(g.ExactlyOne), Value: fmtSpread(g.UpstreamCalls, func(v float64) string { return fmt.Sprintf("%g", v) })})
	}
	for _, g := range r.Stampede {
		if g.Instances < 2 {
			continue
		}
		detail := fmt.Sprintf("per waiter: p50 %s, p99 %s ms; waiters on other instances: p99 %s ms", msNum(g.Waiters.P50), msNum(g.Waiters.P99), msNum(g.CrossWaiters.P99))
		for _, e := range r.Stampede {
			if e.Instances == 1 && !e.Redis && e.Size == g.Size {
				// In-process followers need no wake-up through Redis: what
				// they take is the cost of writing the burst's answers.
				detail += fmt.Sprintf("; embedded ×1 (no Redis, same burst): MISS→last p99 %s ms", msNum(e.LastWaiter.P99))
			}
		}
		cs = append(cs, Check{Name: fmt.Sprintf("Stampede %s, burst %d: MISS answer → last waiter, p99 over bursts", g.Config, g.Size), Target: "≤ 10 ms",
			Status: passIf(g.LastWaiter.P99 <= 10), Value: fmt.Sprintf("%s ms (p50 %s ms, %d bursts)", msNum(g.LastWaiter.P99), msNum(g.LastWaiter.P50), g.LastWaiter.N), Detail: detail})
	}
	if len(r.Stampede) > 0 {
		cs = append(cs, Check{Name: "Stampede, polling only", Target: "reported", Status: "INFO", Value: "not measured here",
			Detail: "the gateway binary has no switch to turn the pub/sub bus off; BenchmarkStampede/poll in internal/server measures it in-process"})
	}

	// Streaming. The target names no mode; both are judged.
	sc := streamCase()
	for _, mode := range []struct{ target, label string }{
		{"corral-embedded", "embedded"},
		{"corral-redis", "Redis mode"},
	} {
		name := "Streaming (MISS, " + mode.label + "): TTFB p50 added over the floor"
		floor, gw := findGroup(r.Streaming, sc, "floor"), findGroup(r.Streaming, sc, mode.target)
		if floor == nil || gw == nil || gw.TTFBP50 == nil || floor.TTFBP50 == nil {
			na(name, "≤ +0.5 ms")
			continue
		}
		s := paired(gw, floor, ttfbP50Of, delta)
		detail := ""
		if s.Median > 0.5 {
			detail = fmt.Sprintf("over by %.3f ms", s.Median-0.5)
		}
		cs = append(cs, Check{Name: name, Target: "≤ +0.5 ms", Status: passIf(s.Median <= 0.5), Detail: detail,
			Value: fmtSpread(s, signedMS) + " ms" + fmt.Sprintf(" (TTFB p50 %s vs %s ms)", msNum(gw.TTFBP50.Median), msNum(floor.TTFBP50.Median))})
	}
	for _, f := range r.Followers {
		cs = append(cs, Check{Name: fmt.Sprintf("Streaming followers (%s, %d identical streams): TTFB", f.Config, f.Size), Target: "reported", Status: "INFO",
			Value: fmt.Sprintf("followers p50 %s / p99 %s ms; leader p50 %s ms", msNum(f.FollowerTTFB.P50), msNum(f.FollowerTTFB.P99), msNum(f.LeaderTTFB.P50))})
	}

	// Footprint.
	for _, p := range r.Footprint {
		cs = append(cs, Check{Name: fmt.Sprintf("Footprint, %s: memory per open stream at %d streams", p.Target, p.Streams), Target: "reported", Status: "INFO",
			Value: fmt.Sprintf("%.1f KiB (RSS %s → %s MiB)", p.PerStreamKiB, mib(p.BaselineKiB), mib(p.RSSKiB))})
	}
	return cs
}

// cpuCheck reports the CPU one request costs gw against the floor: the
// proxies' efficiency, which a saturated load core does not hide.
func cpuCheck(name string, gw, floor *Group) Check {
	per := func(g *Group) []float64 {
		xs := make([]float64, len(g.Runs))
		for i, r := range g.Runs {
			xs[i] = cpuPerRequest(r, g.proc)
		}
		return xs
	}
	a, b := per(gw), per(floor)
	rs := make([]float64, min(len(a), len(b)))
	for i := range rs {
		rs[i] = ratio(a[i], b[i])
	}
	sp := spreadOf(rs)
	return Check{Name: name, Target: "reported", Status: "INFO",
		Value: fmtSpread(sp, func(v float64) string { return fmt.Sprintf("%.2f×", v) }) +
			fmt.Sprintf(" (%.1f vs %.1f µs)", gw.CPUPerRequest.Median, floor.CPUPerRequest.Median),
		Detail: "CPU time of the proxy process per answered request; < 1 means cheaper than the floor"}
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

func writeChecks(w io.Writer, r *Report) {
	fmt.Fprintf(w, "\n## Targets (issue 6)\n\n")
	t := &table{head: []string{"target", "wanted", "measured", "status", "note"}, left: true}
	for _, c := range r.Checks {
		t.add(c.Name, c.Target, c.Value, "**"+c.Status+"**", c.Detail)
	}
	t.write(w)
	if len(r.Errors) > 0 {
		fmt.Fprintf(w, "\nFailed: %s\n", strings.Join(r.Errors, "; "))
	}
}
