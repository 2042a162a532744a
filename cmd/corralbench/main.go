// Command corralbench is Corral's load harness (issue 6): it builds the
// gateway and the mock model, starts them as separate processes on
// loopback (with Redis and a bare reverse proxy as the floor), pins them
// with taskset, drives fixed-concurrency and fixed-rate load, and prints
// markdown tables plus a JSON file of every number.
//
//	go run ./cmd/corralbench                 # the standard set (make bench), about 4 minutes
//	go run ./cmd/corralbench -quick          # smoke run, about a minute
//	go run ./cmd/corralbench -scenarios hit,stampede -d 5s
//
// See docs/benchmarks.md for what each scenario measures.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/bench"
)

func main() {
	bench.MaybeRunFloor() // when started as the harness's floor proxy
	bench.Main("corralbench", run)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("corralbench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	quick := fs.Bool("quick", false, "smoke run: every scenario with small numbers (about a minute)")
	out := fs.String("out", "internal/bench/results/latest.json", "JSON report path; empty: none")
	label := fs.String("label", "", "free text stored in the report, e.g. what was measured")
	scenarios := fs.String("scenarios", "", "comma-separated subset of "+strings.Join(bench.AllScenarios, ","))
	reps := fs.Int("reps", 0, "repetitions of every side of a comparison (default 3)")
	d := fs.Duration("d", 0, "measured duration of one load run (default 2s, -quick 300ms)")
	warm := fs.Duration("warmup", 0, "unrecorded warm-up before each load run (default 250ms, -quick 100ms)")
	rate := fs.Float64("rate", 0, "requests per second of the fixed-rate run (default 2000)")
	bursts := fs.Int("bursts", 0, "stampede bursts per configuration and size (default 10, -quick 3)")
	sizes := fs.String("stampede-sizes", "", "stampede burst sizes (default 100,1000)")
	streams := fs.String("streams", "", "footprint open-stream counts (default 1000,5000, -quick 200,1000)")
	allocs := fs.String("alloc-benchtime", "", "-benchtime of the -benchmem run of internal/server; - skips it (default 2000x, -quick 200x)")
	pin := fs.Bool("pin", true, "pin processes with taskset when it exists: proxy under test on CPU 0, load, mock and Redis on CPU 1")
	src := fs.String("src", "", "module root to build cmd/gateway and cmd/mockllm from (default: the one above the working directory)")
	pprofOn := fs.Bool("pprof", false, "serve net/http/pprof from every gateway (CORRAL_PPROF_ADDR) and save a CPU and an allocs profile of each measured load run against a gateway into -pprof-dir")
	pprofDir := fs.String("pprof-dir", "internal/bench/results/pprof", "where -pprof saves profiles (with the gateway binary, for go tool pprof)")
	timeout := fs.Duration("timeout", 15*time.Minute, "stop everything after this long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}

	o := bench.Standard()
	if *quick {
		o = bench.Quick()
	}
	o.Pin, o.SourceDir, o.Label = *pin, *src, *label
	if *pprofOn {
		o.PprofDir = *pprofDir
	}
	if *scenarios != "" {
		o.Scenarios = strings.Split(*scenarios, ",")
	}
	o.Reps = cmp.Or(*reps, o.Reps)
	o.Duration = cmp.Or(*d, o.Duration)
	o.Warmup = cmp.Or(*warm, o.Warmup)
	o.Rate = cmp.Or(*rate, o.Rate)
	o.StampedeBursts = cmp.Or(*bursts, o.StampedeBursts)
	o.AllocBenchtime = cmp.Or(*allocs, o.AllocBenchtime)
	var err error
	if o.StampedeSizes, err = intsFlag("stampede-sizes", *sizes, o.StampedeSizes); err != nil {
		return err
	}
	if o.OpenStreams, err = intsFlag("streams", *streams, o.OpenStreams); err != nil {
		return err
	}
	o.Log, o.Tables = stderr, stdout

	// Every child inherits the limit; the footprint scenario needs
	// thousands of sockets per process.
	if _, err := bench.RaiseNoFile(); err != nil {
		fmt.Fprintln(stderr, "corralbench: raising the open-files limit:", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	rep, err := bench.Run(ctx, o)
	if rep != nil && *out != "" {
		if werr := bench.WriteJSON(*out, rep); werr != nil {
			err = errors.Join(err, werr)
		} else {
			fmt.Fprintf(stderr, "corralbench: wrote %s (%.0fs)\n", *out, rep.Seconds)
		}
	}
	if err == nil && rep != nil && len(rep.Errors) > 0 {
		err = fmt.Errorf("%d scenario(s) failed: %s", len(rep.Errors), strings.Join(rep.Errors, "; "))
	}
	return err
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v != zero {
		return v
	}
	return def
}

func intsFlag(name, s string, def []int) ([]int, error) {
	if s == "" {
		return def, nil
	}
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s: %q is not a positive number", name, f)
		}
		out = append(out, n)
	}
	return out, nil
}
