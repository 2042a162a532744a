package bench

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Profiling (-pprof): every gateway the harness starts gets
// CORRAL_PPROF_ADDR on a free loopback port, and every load run of a
// comparison against a gateway saves, over the run's measured window, a
// CPU profile (/debug/pprof/profile?seconds=N) and an allocation profile
// (/debug/pprof/allocs?seconds=N, a delta over the same N seconds) into
// Options.PprofDir, with the gateway binary beside them for
// `go tool pprof`. Profiling costs the gateway a little CPU, so the
// numbers of a profiled run are not the ones to compare with a plain run.

// ProfileFile is one saved profile, listed in the report.
type ProfileFile struct {
	Scenario string `json:"scenario"`
	Case     string `json:"case"`
	Target   string `json:"target"`
	Rep      int    `json:"rep"`
	Kind     string `json:"kind"` // "cpu" or "allocs"
	Path     string `json:"path"`
	Seconds  int    `json:"seconds"`
	// Requests is the run's throughput times Seconds: about the requests
	// the profile covers, to turn the profile's totals into per-request
	// costs.
	Requests float64 `json:"requests"`
	Error    string  `json:"error,omitempty"`
}

// profileSeconds is the profile window: the measured duration in whole
// seconds, at least 1.
func (o *Options) profileSeconds() int {
	return max(1, int(o.Duration/time.Second))
}

// startProfiles begins fetching the CPU and allocation profiles of p for
// the measured window of a load run that starts now (after o.Warmup).
// The returned function waits for both and lists the files; throughput is
// the run's, to estimate the requests a profile covers.
func (h *harness) startProfiles(ctx context.Context, cs caseSpec, t target, rep int) func(throughput float64) {
	if h.o.PprofDir == "" || t.proc.pprofAddr == "" {
		return func(float64) {}
	}
	secs := h.o.profileSeconds()
	base := fmt.Sprintf("%s_%s_%s_rep%d", slug(cs.scenario), slug(cs.name), slug(t.name), rep)
	files := []ProfileFile{
		{Kind: "cpu", Path: filepath.Join(h.o.PprofDir, base+".cpu.pb.gz")},
		{Kind: "allocs", Path: filepath.Join(h.o.PprofDir, base+".allocs.pb.gz")},
	}
	urls := []string{
		fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", t.proc.pprofAddr, secs),
		fmt.Sprintf("http://%s/debug/pprof/allocs?seconds=%d", t.proc.pprofAddr, secs),
	}
	var wg sync.WaitGroup
	for i := range files {
		f := &files[i]
		f.Scenario, f.Case, f.Target, f.Rep, f.Seconds = cs.scenario, cs.name, t.name, rep, secs
		wg.Go(func() {
			if !sleepUntil(ctx, time.Now().Add(h.o.Warmup)) {
				f.Error = ctx.Err().Error()
				return
			}
			if err := fetchTo(ctx, urls[i], f.Path, time.Duration(secs+30)*time.Second); err != nil {
				f.Error = err.Error()
			}
		})
	}
	return func(throughput float64) {
		wg.Wait()
		for i := range files {
			files[i].Requests = throughput * float64(secs)
			if files[i].Error != "" {
				h.o.logf("  pprof %s: %s", files[i].Path, files[i].Error)
			}
		}
		h.rep.Profiles = append(h.rep.Profiles, files...)
	}
}

func fetchTo(ctx context.Context, url, path string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// preparePprofDir creates the profile directory and copies the gateway
// binary into it, so `go tool pprof DIR/gateway DIR/*.cpu.pb.gz` works
// after the run's temporary directory is gone.
func (c *cluster) preparePprofDir() error {
	dir := c.o.PprofDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	src, err := os.Open(c.gatewayBin)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(dir, "gateway"), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// slug turns a case or target name into a file-name part.
func slug(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		ok := r >= 'a' && r <= 'z' || r >= '0' && r <= '9'
		if ok {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.TrimSuffix(b.String(), "-")
}
