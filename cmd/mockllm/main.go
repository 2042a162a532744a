// Command mockllm serves the deterministic OpenAI-compatible fake model of
// package mockllm over HTTP, for benchmarks and manual tests that need the
// upstream in a separate process.
//
// Flags override the environment, which overrides the defaults:
//
//	-addr         MOCKLLM_ADDR          listen address [127.0.0.1:9090]
//	-latency      MOCKLLM_LATENCY       delay before the first byte [0s]
//	-chunks       MOCKLLM_CHUNKS        content chunks per stream [5]
//	-chunk-delay  MOCKLLM_CHUNK_DELAY   delay before each content chunk [0s]
//	-slow-latency MOCKLLM_SLOW_LATENCY  latency of the mock-slow model [5s]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/corralhq/corral/internal/httpserve"
	"github.com/corralhq/corral/internal/mockllm"
)

// shutdownTimeout bounds the graceful shutdown; streams still running after
// it are cut.
const shutdownTimeout = 10 * time.Second

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Getenv, os.Stderr)
	stop()
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "mockllm:", err)
		os.Exit(1)
	}
}

// config is the parsed command line and environment.
type config struct {
	addr string
	opts mockllm.Options
}

// parseConfig reads flags from args, with defaults taken from getenv.
func parseConfig(args []string, getenv func(string) string, out io.Writer) (config, error) {
	c := config{addr: "127.0.0.1:9090", opts: mockllm.Options{StreamChunks: 5, SlowLatency: 5 * time.Second}}
	if v := getenv("MOCKLLM_ADDR"); v != "" {
		c.addr = v
	}
	for _, e := range []struct {
		name string
		dst  *time.Duration
	}{
		{"MOCKLLM_LATENCY", &c.opts.Latency},
		{"MOCKLLM_CHUNK_DELAY", &c.opts.ChunkDelay},
		{"MOCKLLM_SLOW_LATENCY", &c.opts.SlowLatency},
	} {
		if v := getenv(e.name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil {
				return c, fmt.Errorf("%s: %w", e.name, err)
			}
			*e.dst = d
		}
	}
	if v := getenv("MOCKLLM_CHUNKS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return c, fmt.Errorf("MOCKLLM_CHUNKS: %w", err)
		}
		c.opts.StreamChunks = n
	}

	fs := flag.NewFlagSet("mockllm", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&c.addr, "addr", c.addr, "listen address (env MOCKLLM_ADDR)")
	fs.DurationVar(&c.opts.Latency, "latency", c.opts.Latency, "delay before the first byte of every answer (env MOCKLLM_LATENCY)")
	fs.IntVar(&c.opts.StreamChunks, "chunks", c.opts.StreamChunks, "content chunks per streamed reply (env MOCKLLM_CHUNKS)")
	fs.DurationVar(&c.opts.ChunkDelay, "chunk-delay", c.opts.ChunkDelay, "delay before each content chunk (env MOCKLLM_CHUNK_DELAY)")
	fs.DurationVar(&c.opts.SlowLatency, "slow-latency", c.opts.SlowLatency, "latency of the mock-slow model (env MOCKLLM_SLOW_LATENCY)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	switch {
	case c.opts.Latency < 0:
		return c, errors.New("latency must not be negative")
	case c.opts.ChunkDelay < 0:
		return c, errors.New("chunk-delay must not be negative")
	case c.opts.SlowLatency <= 0:
		return c, errors.New("slow-latency must be positive")
	case c.opts.StreamChunks < 1:
		return c, errors.New("chunks must be at least 1")
	}
	return c, nil
}

// run parses the configuration, listens and serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, stderr io.Writer) error {
	c, err := parseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.addr)
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stderr, nil))
	log.Info("mockllm listening",
		"addr", ln.Addr().String(),
		"latency", c.opts.Latency,
		"chunks", c.opts.StreamChunks,
		"chunk_delay", c.opts.ChunkDelay,
		"slow_latency", c.opts.SlowLatency)
	return serve(ctx, ln, mockllm.New(c.opts))
}

// serve serves h on ln until ctx ends, then shuts down gracefully within
// shutdownTimeout. It closes ln.
func serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute, // headers and body; answers may stream far longer
		IdleTimeout:       2 * time.Minute,
		// No WriteTimeout: it would cut long or slow streams.
	}
	// Requests still running after shutdownTimeout (mock-hang, long
	// streams) are cut.
	_, err := httpserve.Serve(ctx, srv, ln, shutdownTimeout, nil)
	return err
}
