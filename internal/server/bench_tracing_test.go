package server

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/telemetry/otlp"
)

// BenchmarkHitTracing is a memory cache hit with tracing off and on (the
// default sampler, parentbased_always_on, so every request is sampled,
// exported over OTLP/HTTP by the batch processor to a local receiver that
// discards), end to end over loopback HTTP and in process through
// ServeHTTP, where the gateway's own cost is not hidden by the network.
func BenchmarkHitTracing(b *testing.B) {
	b.Cleanup(benchClient.CloseIdleConnections)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	b.Cleanup(recv.Close)
	p, err := otlp.New(context.Background(), otlp.Options{Getenv: func(k string) (string, bool) {
		if k == "OTEL_EXPORTER_OTLP_ENDPOINT" {
			return recv.URL, true
		}
		return "", false
	}})
	if err != nil || !p.Enabled() {
		b.Fatalf("tracing: %v", err)
	}
	b.Cleanup(func() { _ = p.Shutdown(context.Background()) })
	body := chatBody("hit benchmark, traced")
	for _, mode := range []struct {
		name string
		opt  func(*harnessOptions)
	}{
		{"off", func(*harnessOptions) {}},
		{"on", withServer(func(so *Options) { so.Tracing = p.TracerProvider() })},
	} {
		h := newHarness(b, mode.opt)
		benchPost(b, h.gw.URL, body)
		b.Run("http/"+mode.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				benchPost(b, h.gw.URL, body)
			}
		})
		b.Run("handler/"+mode.name, func(b *testing.B) {
			b.ReportAllocs()
			defer cpuPerOp(b)()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+acmeKey)
				req.Header.Set("Content-Type", "application/json")
				w := httptest.NewRecorder()
				h.srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK || w.Header().Get("X-Corral-Cache") != cacheHit {
					b.Fatalf("%d %s", w.Code, w.Header().Get("X-Corral-Cache"))
				}
			}
		})
	}
}

// cpuPerOp reports the process's CPU time (user and system, every
// goroutine's: the exporter's too) per op as cpu-ns/op, when the returned
// func is called at the end of the benchmark. On a machine shared with
// other work, CPU time is steadier than wall time, which includes waiting
// for a core.
func cpuPerOp(b *testing.B) func() {
	start := cpuTime()
	return func() {
		b.ReportMetric(float64((cpuTime()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
