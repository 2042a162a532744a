package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"
)

// The streaming scenario's stream: 20 content chunks 10 ms apart, so a
// stream lasts about 200 ms; the mock sends the role chunk at once, so
// time to first byte is the path's own cost.
const (
	streamChunks       = 20
	streamChunkDelayMS = 10
	streamConns        = 4
	followerSize       = 10
)

var streamMock = mockControl{Chunks: streamChunks, ChunkDelayMS: streamChunkDelayMS}

func streamCase() string {
	return fmt.Sprintf("stream:true, %d chunks %d ms apart, %d conns", streamChunks, streamChunkDelayMS, streamConns)
}

// FollowerGroup is one configuration of the concurrent-identical-streams
// part of the streaming scenario.
type FollowerGroup struct {
	Config    string `json:"config"`
	Instances int    `json:"instances"`
	Size      int    `json:"streams_per_burst"`
	Bursts    int    `json:"bursts"`
	// UpstreamCalls are the mock's requests per burst.
	UpstreamCalls Spread         `json:"upstream_calls_per_burst"`
	Answers       map[string]int `json:"answers"`
	// Times to first byte and to the end, from each request's own send.
	LeaderTTFB        Summary `json:"leader_ttfb"`
	FollowerTTFB      Summary `json:"follower_ttfb"`
	CrossFollowerTTFB Summary `json:"cross_instance_follower_ttfb"`
	LeaderTotal       Summary `json:"leader_total"`
	FollowerTotal     Summary `json:"follower_total"`
	FirstError        string  `json:"first_error,omitempty"`
}

// streaming is scenario 4: time to first byte and total stream time,
// direct, through the floor and through Corral on the MISS path (a new
// prompt for every request, so every stream is a leader's live relay),
// then bursts of identical concurrent streams through Corral: followers'
// time to first byte.
func (h *harness) streaming(ctx context.Context) error {
	ts, err := h.proxyTargets(ctx, "corral-embedded", "corral-redis")
	if err != nil {
		return err
	}
	hdr := benchHeader("")
	nonce := time.Now().UnixNano()
	cs := caseSpec{scenario: ScenarioStreaming, name: streamCase()}
	gs, err := h.compare(ctx, cs, ts, func(ctx context.Context, t target) (RunResult, error) {
		spec := reqSpec{url: t.url, header: hdr, stream: true, wantCache: t.want("MISS"),
			body: func(seq int64) []byte {
				return chatBody(fmt.Sprintf("stream %d %s %d", nonce, t.name, seq), true, streamMock)
			}}
		return closedLoop(ctx, spec, streamConns, h.o.Warmup, h.o.Duration, h.watch(t)), nil
	})
	if err != nil {
		return err
	}
	h.rep.Streaming = gs
	if err := h.followers(ctx, hdr, nonce); err != nil {
		return err
	}
	writeStreaming(h.o.Tables, h.rep.Streaming, h.rep.Followers)
	return nil
}

type followerConfig struct {
	name string
	gws  []*proc
}

// followers fires bursts of followerSize identical streams (a new prompt
// per burst) at one embedded gateway and, round robin, at three
// Redis-mode gateways; the configurations alternate burst by burst.
func (h *harness) followers(ctx context.Context, hdr http.Header, nonce int64) error {
	gw, err := h.embedded(ctx)
	if err != nil {
		return err
	}
	cfgs := []followerConfig{{name: "embedded ×1", gws: []*proc{gw}}}
	if rg, err := h.redisGateways(ctx, 3); err == nil {
		cfgs = append(cfgs, followerConfig{name: "redis ×3", gws: rg})
	}
	type acc struct {
		calls                       []float64
		answers                     map[string]int
		lt, ft, xft, ltotal, ftotal []time.Duration
		firstErr                    string
	}
	accs := make([]acc, len(cfgs))
	for i := range accs {
		accs[i].answers = map[string]int{}
	}
	c := newClient(followerSize * 3)
	defer c.CloseIdleConnections()
	for round := range h.o.FollowerBursts {
		for k := range cfgs {
			i := (round + k) % len(cfgs)
			cfg := cfgs[i]
			before, err := h.c.mockRequests(ctx)
			if err != nil {
				return err
			}
			body := chatBody(fmt.Sprintf("followers %d %s %d", nonce, cfg.name, round), true, streamMock)
			got, _ := fire(ctx, cfg.gws, followerSize, func(ctx context.Context, url string) answer {
				return doRequest(ctx, c, url, hdr, body, true, make([]byte, 32<<10))
			})
			after, err := h.c.mockRequests(ctx)
			if err != nil {
				return err
			}
			a := &accs[i]
			a.calls = append(a.calls, float64(after-before))
			leader := -1
			for j, g := range got {
				if g.err == nil && g.cache == "MISS" {
					leader = j
				}
			}
			for j, g := range got {
				if !countAnswer(a.answers, &a.firstErr, g.cache, g.err) {
					continue
				}
				if j == leader {
					a.lt, a.ltotal = append(a.lt, g.ttfb), append(a.ltotal, g.latency)
					continue
				}
				a.ft, a.ftotal = append(a.ft, g.ttfb), append(a.ftotal, g.latency)
				if leader >= 0 && g.instance != got[leader].instance {
					a.xft = append(a.xft, g.ttfb)
				}
			}
			h.o.logf("  streaming | followers %s | burst %d/%d | upstream calls %d", cfg.name, round+1, h.o.FollowerBursts, after-before)
		}
	}
	for i, cfg := range cfgs {
		a := &accs[i]
		h.rep.Followers = append(h.rep.Followers, FollowerGroup{
			Config: cfg.name, Instances: len(cfg.gws), Size: followerSize, Bursts: len(a.calls),
			UpstreamCalls: spreadOf(a.calls), Answers: a.answers,
			LeaderTTFB: summarize(a.lt), FollowerTTFB: summarize(a.ft), CrossFollowerTTFB: summarize(a.xft),
			LeaderTotal: summarize(a.ltotal), FollowerTotal: summarize(a.ftotal), FirstError: a.firstErr,
		})
	}
	return nil
}

func writeStreaming(w io.Writer, gs []Group, fs []FollowerGroup) {
	fmt.Fprintf(w, "\n## 4. Streaming (%s)\n\n", streamCase())
	fmt.Fprintf(w, "Every request has a new prompt: Corral answers each as a MISS, relaying the leader's live stream.\n\n")
	floor := findGroup(gs, streamCase(), "floor")
	direct := findGroup(gs, streamCase(), "direct")
	t := &table{head: []string{"target", "TTFB p50 ms", "TTFB p99 ms", "TTFB p50 vs direct", "TTFB p50 vs floor", "total p50 ms", "total p99 ms", "streams/s", "proxy CPU", "other procs CPU", "errors"}}
	for i := range gs {
		g := &gs[i]
		if g.TTFBP50 == nil { // no run completed a stream
			t.add(g.Target, "–", "–", "", "", fmtMS(g.P50), fmtMS(g.P99), fmtRate(g.Throughput), fmtCores(g.ProxyCPU), fmtCores(g.OtherCPU), fmtErrors(g))
			continue
		}
		t.add(g.Target, fmtMS(*g.TTFBP50), fmtMS(*g.TTFBP99), fmtDelta(direct, g, ttfbP50Of), fmtDelta(floor, g, ttfbP50Of),
			fmtMS(g.P50), fmtMS(g.P99), fmtRate(g.Throughput), fmtCores(g.ProxyCPU), fmtCores(g.OtherCPU), fmtErrors(g))
	}
	t.write(w)
	if len(fs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nConcurrent identical streams (%d per burst, a new prompt per burst):\n\n", followerSize)
	ft := &table{head: []string{"config", "bursts", "upstream calls / burst", "answers", "leader TTFB p50 ms", "follower TTFB p50 ms", "follower TTFB p99 ms", "other-instance follower TTFB p99 ms", "leader total p50 ms", "follower total p50 ms"}}
	for _, f := range fs {
		cross := "–"
		if f.Instances > 1 {
			cross = msNum(f.CrossFollowerTTFB.P99)
		}
		ft.add(f.Config, fmt.Sprint(f.Bursts), fmtSpread(f.UpstreamCalls, func(v float64) string { return fmt.Sprintf("%g", v) }),
			fmtAnswers(f.Answers), msNum(f.LeaderTTFB.P50), msNum(f.FollowerTTFB.P50), msNum(f.FollowerTTFB.P99), cross,
			msNum(f.LeaderTotal.P50), msNum(f.FollowerTotal.P50))
	}
	ft.write(w)
}
