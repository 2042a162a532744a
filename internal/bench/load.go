package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The load generator is the project's own small client rather than a
// library such as vegeta: the scenarios need things a generic tool does
// not give (the X-Corral-Cache header of every answer, time to first byte
// of SSE streams, answer times of every request in a burst), and plain
// net/http with a large keep-alive pool is all the load part needs.

// reqSpec is what one load run sends and how it reads the answers.
type reqSpec struct {
	url    string
	header http.Header // read-only, shared by every request of the run
	// body returns the body of request number seq (0, 1, 2, ... per run).
	body func(seq int64) []byte
	// stream reads the answer as SSE: it records the time to the first
	// body byte and requires the stream to end with data: [DONE].
	stream bool
	// wantCache, when set, is the X-Corral-Cache value every answer should
	// carry; others are counted in RunResult.Unexpected.
	wantCache string
}

// RunResult is one measured load run against one target.
type RunResult struct {
	Target string  `json:"target"`
	Rep    int     `json:"rep"`
	Mode   string  `json:"mode"` // "closed" (fixed concurrency) or "open" (fixed rate)
	Conns  int     `json:"conns,omitempty"`
	Rate   float64 `json:"rate_rps,omitempty"`
	// Seconds is the measured window; requests started in it count.
	Seconds  float64 `json:"seconds"`
	Requests int64   `json:"requests"`
	// Sent counts every request of the run, warm-up included.
	Sent       int64  `json:"sent"`
	Errors     int64  `json:"errors"`
	Unexpected int64  `json:"unexpected_cache_status,omitempty"`
	FirstError string `json:"first_error,omitempty"`
	// Throughput is successful requests per second of the window.
	Throughput float64  `json:"throughput_rps"`
	Latency    Summary  `json:"latency"`
	TTFB       *Summary `json:"ttfb,omitempty"`
	// Lateness is how far behind schedule the open-loop sender was; a
	// large value means the load generator, not the target, was the limit.
	Lateness *Summary `json:"send_lateness,omitempty"`
	// CPU is cores used over the window, per watched process and for the
	// harness itself ("loadgen"): 1.0 is one core busy all the time.
	CPU map[string]float64 `json:"cpu_cores,omitempty"`
	// Redis is Redis work per sent request (hit scenario, Redis mode).
	Redis map[string]float64 `json:"redis_per_request,omitempty"`
}

// newClient returns a keep-alive client with an idle pool big enough for
// conns concurrent requests to one host.
func newClient(conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}}
}

// answer is the outcome of one request.
type answer struct {
	latency time.Duration // send to last body byte
	ttfb    time.Duration // send to first body byte (streams only)
	cache   string        // X-Corral-Cache
	err     error
}

// doRequest sends one POST and reads the whole answer. buf is the
// caller's scratch buffer for stream reads.
func doRequest(ctx context.Context, c *http.Client, url string, hdr http.Header, body []byte, stream bool, buf []byte) answer {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return answer{err: err}
	}
	req.Header = hdr
	start := time.Now()
	resp, err := c.Do(req)
	if err != nil {
		return answer{err: err}
	}
	defer resp.Body.Close()
	a := answer{cache: resp.Header.Get("X-Corral-Cache")}
	if !stream {
		_, err = io.Copy(io.Discard, resp.Body)
		a.latency = time.Since(start)
	} else {
		a.ttfb, a.latency, err = readStream(resp.Body, start, buf)
	}
	switch {
	case err != nil:
		a.err = err
	case resp.StatusCode != http.StatusOK:
		a.err = fmt.Errorf("status %d", resp.StatusCode)
	}
	return a
}

var doneEvent = []byte("data: [DONE]")

// readStream reads an SSE body to its end and reports the time from start
// to the first body byte and to the last. A stream that does not end with
// data: [DONE] is an error.
func readStream(r io.Reader, start time.Time, buf []byte) (ttfb, total time.Duration, err error) {
	var tail [32]byte
	tn := 0
	for {
		n, rerr := r.Read(buf)
		if n > 0 {
			if ttfb == 0 {
				ttfb = time.Since(start)
			}
			// Keep the last bytes to check the final event.
			if n >= len(tail) {
				tn = copy(tail[:], buf[n-len(tail):n])
			} else {
				keep := min(tn, len(tail)-n)
				copy(tail[:], tail[tn-keep:tn])
				tn = keep + copy(tail[keep:], buf[:n])
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return ttfb, time.Since(start), rerr
		}
	}
	total = time.Since(start)
	if !bytes.Contains(tail[:tn], doneEvent) {
		return ttfb, total, fmt.Errorf("stream did not end with data: [DONE]")
	}
	return ttfb, total, nil
}

// tally collects the answers of one run.
type tally struct {
	mu         sync.Mutex // protects everything below
	lat, ttfb  []time.Duration
	late       []time.Duration
	errors     int64
	unexpected int64
	firstErr   string
}

func (t *tally) add(a answer, want string, late time.Duration, open bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if a.err != nil {
		t.errors++
		if t.firstErr == "" {
			t.firstErr = a.err.Error()
		}
		return
	}
	t.lat = append(t.lat, a.latency)
	if a.ttfb > 0 {
		t.ttfb = append(t.ttfb, a.ttfb)
	}
	if open {
		t.late = append(t.late, late)
	}
	if want != "" && a.cache != want {
		t.unexpected++
		if t.firstErr == "" {
			t.firstErr = fmt.Sprintf("X-Corral-Cache %q, want %q", a.cache, want)
		}
	}
}

func (t *tally) result(window time.Duration) RunResult {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := RunResult{
		Seconds:    window.Seconds(),
		Requests:   int64(len(t.lat)),
		Errors:     t.errors,
		Unexpected: t.unexpected,
		FirstError: t.firstErr,
		Throughput: float64(len(t.lat)) / window.Seconds(),
		Latency:    summarize(t.lat),
	}
	if len(t.ttfb) > 0 {
		s := summarize(t.ttfb)
		r.TTFB = &s
	}
	if len(t.late) > 0 {
		s := summarize(t.late)
		r.Lateness = &s
	}
	return r
}

// cpuWatch measures the CPU the watched processes and the harness use
// between mark and read, and how busy the whole machine was: on a shared
// machine, "others" (everything that is not the harness or a watched
// process) is the noise a run suffered.
type cpuWatch struct {
	procs   []*proc
	t0      time.Time
	base    []time.Duration
	self    time.Duration
	machine time.Duration
}

func (w *cpuWatch) mark() {
	w.t0 = time.Now()
	w.base = w.base[:0]
	for _, p := range w.procs {
		d, _ := cpuTime(p.pid())
		w.base = append(w.base, d)
	}
	w.self = selfCPUTime()
	w.machine, _ = machineBusy()
}

func (w *cpuWatch) read() map[string]float64 {
	el := time.Since(w.t0).Seconds()
	if el <= 0 || len(w.base) != len(w.procs) {
		return nil
	}
	ours := (selfCPUTime() - w.self).Seconds() / el
	m := map[string]float64{"loadgen": ours}
	for i, p := range w.procs {
		if d, err := cpuTime(p.pid()); err == nil {
			m[p.name] = (d - w.base[i]).Seconds() / el
			ours += m[p.name]
		}
	}
	if busy, err := machineBusy(); err == nil && w.machine > 0 {
		m[cpuMachine] = (busy - w.machine).Seconds() / el
		m[cpuOthers] = max(m[cpuMachine]-ours, 0)
	}
	return m
}

// Keys of RunResult.CPU besides process names.
const (
	cpuMachine = "(machine)" // every process on the machine
	cpuOthers  = "(others)"  // the machine minus the harness and watched processes
)

// machineBusy is the machine's non-idle CPU time from /proc/stat (user,
// nice, system, irq, softirq, steal; guest time is inside user).
func machineBusy() (time.Duration, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0, errors.New("malformed /proc/stat")
	}
	var busy int64
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, err
		}
		busy += n
	}
	return time.Duration(busy) * time.Second / clockTick, nil
}

// sampleCPU marks w at from and reads it at to, in the background; the
// returned func waits for the reading.
func sampleCPU(ctx context.Context, w *cpuWatch, from, to time.Time) func() map[string]float64 {
	var out map[string]float64
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !sleepUntil(ctx, from) {
			return
		}
		w.mark()
		if !sleepUntil(ctx, to) {
			return
		}
		out = w.read()
	}()
	return func() map[string]float64 { <-done; return out }
}

// sleepUntil waits for t or ctx; it reports whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// requestTimeout bounds one request beyond the end of its run.
const requestTimeout = 30 * time.Second

// closedLoop runs conns workers, each sending its next request as soon as
// the previous one is answered, for warm (not recorded: connections open,
// caches and pools fill) and then dur (recorded: requests started in it).
func closedLoop(ctx context.Context, spec reqSpec, conns int, warm, dur time.Duration, watch []*proc) RunResult {
	c := newClient(conns)
	defer c.CloseIdleConnections()
	start := time.Now()
	mStart, mEnd := start.Add(warm), start.Add(warm+dur)
	rctx, cancel := context.WithDeadline(ctx, mEnd.Add(requestTimeout))
	defer cancel()
	cpu := sampleCPU(rctx, &cpuWatch{procs: watch}, mStart, mEnd)

	var seq atomic.Int64
	t := &tally{}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			var buf []byte
			if spec.stream {
				buf = make([]byte, 32<<10)
			}
			for {
				t0 := time.Now()
				if !t0.Before(mEnd) || rctx.Err() != nil {
					return
				}
				a := doRequest(rctx, c, spec.url, spec.header, spec.body(seq.Add(1)-1), spec.stream, buf)
				if !t0.Before(mStart) {
					t.add(a, spec.wantCache, 0, false)
				}
			}
		})
	}
	wg.Wait()
	r := t.result(dur)
	r.Mode, r.Conns, r.CPU, r.Sent = "closed", conns, cpu(), seq.Load()
	return r
}

// openLoop sends requests at a fixed rate regardless of how fast they are
// answered (an open system, as real clients are), for warm and then dur.
// Latency is measured from the actual send; the sender's lag behind its
// schedule is reported apart. At most maxInFlight requests are
// outstanding; a request that would exceed it is dropped and counted as
// an error, so an overloaded target cannot make the harness pile up
// goroutines without bound.
func openLoop(ctx context.Context, spec reqSpec, rate float64, maxInFlight int, warm, dur time.Duration, watch []*proc) RunResult {
	c := newClient(maxInFlight)
	defer c.CloseIdleConnections()
	interval := time.Duration(float64(time.Second) / rate)
	start := time.Now()
	mStart, mEnd := start.Add(warm), start.Add(warm+dur)
	rctx, cancel := context.WithDeadline(ctx, mEnd.Add(requestTimeout))
	defer cancel()
	cpu := sampleCPU(rctx, &cpuWatch{procs: watch}, mStart, mEnd)

	t := &tally{}
	var inFlight, sent atomic.Int64
	var wg sync.WaitGroup
	total := int64((warm + dur) / interval)
	for i := range total {
		at := start.Add(time.Duration(i) * interval)
		if !sleepUntil(rctx, at) {
			break
		}
		if inFlight.Load() >= int64(maxInFlight) {
			if !at.Before(mStart) {
				t.add(answer{err: fmt.Errorf("dropped: %d requests in flight", maxInFlight)}, "", 0, true)
			}
			continue
		}
		inFlight.Add(1)
		sent.Add(1)
		wg.Go(func() {
			defer inFlight.Add(-1)
			var buf []byte
			if spec.stream {
				buf = make([]byte, 32<<10)
			}
			sent := time.Now()
			a := doRequest(rctx, c, spec.url, spec.header, spec.body(i), spec.stream, buf)
			if !at.Before(mStart) {
				t.add(a, spec.wantCache, sent.Sub(at), true)
			}
		})
	}
	wg.Wait()
	r := t.result(dur)
	r.Mode, r.Rate, r.CPU, r.Sent = "open", rate, cpu(), sent.Load()
	return r
}
