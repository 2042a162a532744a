package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// FootprintPoint is the memory of one proxy process holding Streams open
// streams.
type FootprintPoint struct {
	Target  string `json:"target"`
	Streams int    `json:"streams"`
	// Opened is how many streams had their first byte when RSS was read.
	Opened      int     `json:"opened"`
	Errors      int     `json:"errors"`
	FirstError  string  `json:"first_error,omitempty"`
	OpenSeconds float64 `json:"open_seconds"`
	// BaselineKiB is VmRSS after a short warm-up with no stream open,
	// RSSKiB with the streams open; PerStreamKiB their difference over
	// Opened.
	BaselineKiB  int64   `json:"baseline_rss_kib"`
	RSSKiB       int64   `json:"rss_kib"`
	PerStreamKiB float64 `json:"per_stream_kib"`
}

// Footprint streams: slow (a chunk a second, for two minutes at most) so
// they stay open while RSS is read; each has its own prompt, so through
// Corral each is a leader with its own upstream stream and live record.
var footprintMock = mockControl{Chunks: 120, ChunkDelayMS: 1000}

const (
	openBatch    = 250                   // streams opened together
	openPause    = 50 * time.Millisecond // between batches
	openTimeout  = 60 * time.Second      // for all streams to start
	footprintRSS = time.Second           // settle before reading RSS
)

// footprint is scenario 5: RSS of a fresh gateway (embedded) and, for
// scale, of a fresh floor proxy with N concurrent open streams; then
// allocations per request from the internal/server benchmarks.
func (h *harness) footprint(ctx context.Context) error {
	if _, err := RaiseNoFile(); err != nil {
		h.o.logf("raising the open-files limit: %v", err)
	}
	var errs []error
	for _, n := range h.o.OpenStreams {
		for _, kind := range []string{"floor", "corral-embedded"} {
			p, err := h.footprintPoint(ctx, kind, n)
			if err != nil {
				if ctx.Err() != nil {
					return err
				}
				errs = append(errs, fmt.Errorf("%s, %d streams: %w", kind, n, err))
				continue
			}
			h.o.logf("  footprint | %s | %d streams: opened %d, RSS %s → %s MiB, %.1f KiB per stream",
				kind, n, p.Opened, mib(p.BaselineKiB), mib(p.RSSKiB), p.PerStreamKiB)
			h.rep.Footprint = append(h.rep.Footprint, p)
		}
	}
	if h.o.AllocBenchtime != "-" {
		allocs, err := h.allocations(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			errs = append(errs, fmt.Errorf("allocations: %w", err))
		}
		h.rep.Allocations = allocs
	}
	writeFootprint(h.o.Tables, h.rep.Footprint, h.rep.Allocations, h.o.AllocBenchtime)
	return errors.Join(errs...)
}

// footprintPoint starts a fresh proxy of kind, opens n streams through it
// and reads its RSS.
func (h *harness) footprintPoint(ctx context.Context, kind string, n int) (FootprintPoint, error) {
	pt := FootprintPoint{Target: kind, Streams: n}
	var p *proc
	var err error
	if kind == "floor" {
		p, err = h.c.startFloorWith(ctx, "floor-footprint", true)
	} else {
		var extra []string
		if h.o.PprofDir != "" {
			// A finer heap sample than the default 512 KiB: one stream
			// holds tens of KiB.
			extra = append(extra, "GODEBUG=memprofilerate=4096")
		}
		p, err = h.c.startGateway(ctx, "corral-footprint", false, extra...)
	}
	if err != nil {
		return pt, err
	}
	defer h.c.ps.stop(p, 2*time.Second)
	url := "http://" + p.addr + "/v1/chat/completions"
	hdr := benchHeader("")
	nonce := time.Now().UnixNano()

	// Warm up: a few requests and streams, so the baseline includes the
	// runtime's and the process's steady state, not a cold start.
	warm := newClient(8)
	for i := range 20 {
		body := chatBody(fmt.Sprintf("footprint warm %d %s %d", nonce, kind, i), i%2 == 0, mockControl{Chunks: 2})
		if a := doRequest(ctx, warm, url, hdr, body, i%2 == 0, make([]byte, 4<<10)); a.err != nil {
			warm.CloseIdleConnections()
			return pt, fmt.Errorf("warm-up: %w", a.err)
		}
	}
	warm.CloseIdleConnections()
	if !sleepUntil(ctx, time.Now().Add(500*time.Millisecond)) {
		return pt, ctx.Err()
	}
	if pt.BaselineKiB, err = rssKiB(p.pid()); err != nil {
		return pt, err
	}
	h.footprintProfiles(ctx, p, kind, n, "idle")

	t0 := time.Now()
	set := openStreams(ctx, url, hdr, n, func(i int) []byte {
		return chatBody(fmt.Sprintf("footprint %d %s %d", nonce, kind, i), true, footprintMock)
	})
	defer set.release()
	pt.OpenSeconds = time.Since(t0).Seconds()
	pt.Opened, pt.Errors, pt.FirstError = int(set.opened.Load()), int(set.errors.Load()), set.firstError()
	if !sleepUntil(ctx, time.Now().Add(footprintRSS)) {
		return pt, ctx.Err()
	}
	if pt.RSSKiB, err = rssKiB(p.pid()); err != nil {
		return pt, err
	}
	if pt.Opened > 0 {
		pt.PerStreamKiB = float64(pt.RSSKiB-pt.BaselineKiB) / float64(pt.Opened)
	}
	h.footprintProfiles(ctx, p, kind, n, "open")
	return pt, nil
}

// footprintProfiles saves, with -pprof, what a gateway holds at one point
// of the footprint scenario (idle before the streams, or with them open):
// its heap (inuse, after a GC; the text form ends with the runtime's
// MemStats, stacks included) and its goroutines. What one open stream
// holds is the difference over the streams opened, for example
// `go tool pprof -sample_index=inuse_space -base <idle>.heap.pb.gz gateway <open>.heap.pb.gz`.
func (h *harness) footprintProfiles(ctx context.Context, p *proc, kind string, n int, when string) {
	if h.o.PprofDir == "" || p.pprofAddr == "" {
		return
	}
	base := filepath.Join(h.o.PprofDir, fmt.Sprintf("footprint_%s_%d_%s", slug(kind), n, when))
	for _, f := range []struct{ query, suffix string }{
		{"heap?gc=1", ".heap.pb.gz"},
		{"heap?gc=1&debug=1", ".heap.txt"},
		{"goroutine", ".goroutine.pb.gz"},
		{"goroutine?debug=1", ".goroutine.txt"},
	} {
		pf := ProfileFile{Scenario: "footprint", Case: fmt.Sprintf("%d streams, %s", n, when), Target: kind,
			Kind: strings.TrimSuffix(strings.TrimPrefix(f.suffix, "."), ".pb.gz"), Path: base + f.suffix}
		if err := fetchTo(ctx, "http://"+p.pprofAddr+"/debug/pprof/"+f.query, pf.Path, 30*time.Second); err != nil {
			pf.Error = err.Error()
			h.o.logf("  pprof %s: %s", pf.Path, pf.Error)
		}
		h.rep.Profiles = append(h.rep.Profiles, pf)
	}
}

// openSet is a set of streams held open by the load generator.
type openSet struct {
	opened, errors atomic.Int64
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	c              *http.Client

	mu       sync.Mutex // protects firstErr
	firstErr string
}

func (s *openSet) firstError() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.firstErr
}

func (s *openSet) fail(err error) {
	s.errors.Add(1)
	s.mu.Lock()
	if s.firstErr == "" {
		s.firstErr = err.Error()
	}
	s.mu.Unlock()
}

// release closes every stream and waits for their goroutines.
func (s *openSet) release() {
	s.cancel()
	s.wg.Wait()
	s.c.CloseIdleConnections()
}

// openStreams opens n streams in batches and returns once each has its
// first byte or failed, or openTimeout passed. The streams stay open,
// read as they come, until release.
func openStreams(ctx context.Context, url string, hdr http.Header, n int, body func(int) []byte) *openSet {
	sctx, cancel := context.WithTimeout(ctx, openTimeout+requestTimeout)
	s := &openSet{cancel: cancel, c: newClient(n)}
	var started sync.WaitGroup // each stream: first byte or failure
	for i := range n {
		if i > 0 && i%openBatch == 0 && !sleepUntil(sctx, time.Now().Add(openPause)) {
			break
		}
		started.Add(1)
		s.wg.Go(func() {
			first := true
			defer func() {
				if first {
					started.Done()
				}
			}()
			req, err := http.NewRequestWithContext(sctx, http.MethodPost, url, bytes.NewReader(body(i)))
			if err != nil {
				s.fail(err)
				return
			}
			req.Header = hdr
			resp, err := s.c.Do(req)
			if err != nil {
				s.fail(err)
				return
			}
			defer resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				s.fail(fmt.Errorf("status %d", resp.StatusCode))
				return
			}
			buf := make([]byte, 1<<10)
			for {
				k, err := resp.Body.Read(buf)
				if k > 0 && first {
					first = false
					s.opened.Add(1)
					started.Done()
				}
				if err != nil {
					if first && sctx.Err() == nil {
						s.fail(err)
					}
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { started.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(openTimeout):
	case <-ctx.Done():
	}
	return s
}

// AllocResult is one internal/server benchmark run with -benchmem.
type AllocResult struct {
	Name        string  `json:"name"`
	NsPerOp     float64 `json:"ns_per_op"`
	BytesPerOp  float64 `json:"bytes_per_op"`
	AllocsPerOp float64 `json:"allocs_per_op"`
}

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+([\d.]+) ns/op\s+([\d.]+) B/op\s+([\d.]+) allocs/op`)

// allocations runs the end-to-end benchmarks of internal/server with
// -benchmem: allocations per request on the upstream path and the hit
// path. They run in-process (client, gateway and mock), so the counts
// include the client and the mock; the "direct" benchmark is that
// baseline. They run on every CPU, not pinned.
func (h *harness) allocations(ctx context.Context) ([]AllocResult, error) {
	actx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	argv := []string{h.o.goTool(), "test", "-run", "^$", "-bench", "^Benchmark(Passthrough|Hit)$", "-benchmem",
		"-benchtime", h.o.AllocBenchtime, "-count", "1", "./internal/server/"}
	if h.c.ps.pin.enabled() {
		argv = append([]string{h.c.ps.pin.taskset, "-c", "0-" + strconv.Itoa(runtime.NumCPU()-1)}, argv...)
	}
	h.o.logf("  allocations: %v", argv)
	cmd := exec.CommandContext(actx, argv[0], argv[1:]...)
	cmd.Dir = h.o.SourceDir
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("%v: %s", err, lastLines(out, 20))
	}
	var res []AllocResult
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		r := AllocResult{Name: m[1]}
		r.NsPerOp, _ = strconv.ParseFloat(m[2], 64)
		r.BytesPerOp, _ = strconv.ParseFloat(m[3], 64)
		r.AllocsPerOp, _ = strconv.ParseFloat(m[4], 64)
		res = append(res, r)
	}
	if len(res) == 0 {
		return nil, fmt.Errorf("no benchmark lines in: %s", lastLines(out, 20))
	}
	return res, nil
}

func lastLines(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimSpace(b), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func writeFootprint(w io.Writer, ps []FootprintPoint, as []AllocResult, benchtime string) {
	fmt.Fprintf(w, "\n## 5. Footprint\n\n")
	if len(ps) > 0 {
		fmt.Fprintf(w, "RSS (VmRSS) of a fresh process with N concurrent open streams (a new prompt each, %d chunks %d ms apart):\n\n", footprintMock.Chunks, footprintMock.ChunkDelayMS)
		t := &table{head: []string{"proxy", "streams", "opened", "errors", "baseline MiB", "with streams MiB", "KiB per stream", "open time s"}}
		for _, p := range ps {
			t.add(p.Target, fmt.Sprint(p.Streams), fmt.Sprint(p.Opened), fmt.Sprint(p.Errors), mib(p.BaselineKiB), mib(p.RSSKiB),
				fmt.Sprintf("%.1f", p.PerStreamKiB), fmt.Sprintf("%.1f", p.OpenSeconds))
		}
		t.write(w)
	}
	if len(as) > 0 {
		fmt.Fprintf(w, "\nAllocations per request (`go test -bench '^Benchmark(Passthrough|Hit)$' -benchmem -benchtime %s ./internal/server/`; in-process, so the numbers include the benchmark's client and mock: compare with `Passthrough/direct`):\n\n", benchtime)
		t := &table{head: []string{"benchmark", "ns/op", "B/op", "allocs/op"}}
		for _, a := range as {
			t.add(a.Name, thousands(a.NsPerOp), thousands(a.BytesPerOp), thousands(a.AllocsPerOp))
		}
		t.write(w)
	}
}
