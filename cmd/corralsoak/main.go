// Command corralsoak is Corral's soak run (make soak; minutes, not part of
// make test or CI): mixed traffic (hits, misses, streams, coalesced
// bursts, bad bodies, upstream 500s, 429s, cut streams and stalls) through
// several gateway processes on one redis-server that is restarted under
// them, sampling each gateway's RSS, goroutines and open sockets at rest
// before, under load, and at rest after.
//
//	go run ./cmd/corralsoak                 # 3 minutes, 3 gateways
//	go run ./cmd/corralsoak -d 10m -out soak.json
//
// The results of a run are in docs/benchmarks.md.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"time"

	"github.com/corralhq/corral/internal/bench"
)

func main() {
	bench.Main("corralsoak", run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("corralsoak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	d := fs.Duration("d", 3*time.Minute, "how long the traffic runs")
	instances := fs.Int("instances", 3, "gateway processes sharing the one redis-server")
	workers := fs.Int("workers", 24, "concurrent clients")
	restart := fs.Duration("restart-every", 40*time.Second, "time between two Redis restarts")
	sample := fs.Duration("sample-every", 15*time.Second, "time between two samples under load")
	out := fs.String("out", "", "JSON report path; empty: none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if _, err := bench.RaiseNoFile(); err != nil {
		return err
	}
	rep, err := bench.Soak(ctx, bench.SoakOptions{
		Duration: *d, Instances: *instances, Workers: *workers,
		RedisRestartEvery: *restart, SampleEvery: *sample, Log: stderr,
	})
	if rep != nil {
		bench.WriteSoak(stdout, rep)
		if *out != "" {
			b, jerr := json.MarshalIndent(rep, "", "  ")
			if jerr == nil {
				jerr = os.WriteFile(*out, b, 0o644)
			}
			err = errors.Join(err, jerr)
		}
	}
	return err
}
