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
	"net/http/pprof"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/corralhq/corral/internal/accessline"
	"github.com/corralhq/corral/internal/config"
	"github.com/corralhq/corral/internal/httpserve"
	"github.com/corralhq/corral/internal/logsink"
)

// run is the whole program behind main: parse arguments, load config,
// serve until ctx ends, shut down gracefully. It returns instead of
// exiting so tests can drive it.
func run(ctx context.Context, args []string, environ []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "keygen":
			return keygen(stdout)
		case "healthcheck":
			return healthcheck(ctx, args[1:], environ, stdout, stderr)
		case "tenants":
			return tenantsCmd(ctx, args[1:], environ, stdout, stderr)
		case "keys":
			return keysCmd(ctx, args[1:], environ, stdout, stderr)
		case "help":
			return writeHelp(stdout)
		}
	}
	fs := flag.NewFlagSet("gateway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { _ = writeHelp(stdout) }
	demo := fs.Bool("demo", false, "serve with the built-in mock model as upstream and a demo tenant key (no account, no network)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil // -h asked for the help it got
		}
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unknown argument %q (subcommands: %s; see gateway help)", fs.Arg(0), subcommandNames())
	}
	cfg, err := config.Load(environ)
	if err != nil {
		return err
	}
	// The demo shows the console too: without an admin token of the
	// operator's, it makes one for this run and prints it (never logs it).
	demoToken := ""
	if *demo && cfg.AdminToken == "" {
		demoToken = newDemoToken()
		cfg.AdminToken = demoToken
	}
	// Log lines go through a bounded asynchronous sink, so no request
	// waits on a write to stderr; it is closed last (deferred first), so
	// every line, the shutdown's included, is written before run returns.
	// A stderr nobody reads would hold that Close, and the process, past
	// the shutdown deadline: the close gets what is left of it (logEnd,
	// set once the shutdown's deadline is known), and at least a moment.
	sink := logsink.New(stderr, logsink.Options{})
	var logEnd time.Time
	defer func() {
		ctx, cancel := context.WithDeadline(context.Background(), later(logEnd, time.Now().Add(logCloseFloor)))
		defer cancel()
		_ = sink.CloseContext(ctx) // nowhere left to report a log that cannot be written
	}()
	log, accessLine := newLogger(sink, cfg.LogLevel)

	// Wire first, listen second: a bad tenants file or a refused default
	// fails before the port is taken.
	gw, err := newGateway(ctx, cfg, gatewayOptions{Demo: *demo, CheckUpstream: true, Logger: log, AccessLine: accessLine, Getenv: lookupIn(environ), LogDropped: sink.Dropped})
	if err != nil {
		return err
	}
	defer gw.Close()
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Addr, err)
	}
	if *demo {
		printDemo(stdout, ln.Addr(), demoToken)
	}
	stopHUP := reloadOnSIGHUP(ctx, gw)
	defer stopHUP()
	if cfg.PprofAddr != "" {
		_, stopPprof, err := servePprof(cfg.PprofAddr, log)
		if err != nil {
			ln.Close()
			return err
		}
		defer stopPprof()
	}
	grace := cfg.ShutdownTimeout
	var end time.Time // when the shutdown must be over
	err = serve(ctx, ln, gw, httpserve.Drain{
		Grace:    grace,
		Stopping: func() { end = time.Now().Add(grace) },
		Cut:      gw.srv.Stop,
		CutAhead: cutAhead(grace),
	}, log)
	if end.IsZero() { // serving failed before any shutdown
		end = time.Now().Add(grace)
	}
	logEnd = end
	// Flights may outlive their requests (a distributed leader finishes its
	// call for waiters elsewhere); let them store and unlock before the
	// deferred Close shuts the Redis client under them, within the same
	// deadline: what is still running then is stopped (its lock released,
	// its live stream deleted), so the process exits within grace.
	wctx, cancel := context.WithDeadline(context.Background(), end.Add(-cutAhead(grace)))
	defer cancel()
	if gw.srv.WaitFlights(wctx) != nil {
		gw.srv.Stop()
		sctx, scancel := context.WithDeadline(context.Background(), end)
		defer scancel()
		if gw.srv.WaitFlights(sctx) != nil {
			log.Warn("shutdown: flights still running after the grace period")
		}
	}
	// The spans of what just ended are flushed in what is left of the
	// grace period (the deferred Close only stops what this did not).
	fctx, fcancel := context.WithDeadline(context.Background(), end)
	defer fcancel()
	if ferr := gw.traces.Shutdown(fctx); ferr != nil {
		log.Warn("shutdown: spans not flushed within the grace period", slog.String("error", ferr.Error()))
	}
	return err
}

// cutAhead is how long before the grace period ends the gateway stops what
// is still open (streams end with their error event, flights release their
// locks), leaving that long for the handlers to return and for the HTTP
// server to notice its connections idle (it polls them every 500ms at
// most).
func cutAhead(grace time.Duration) time.Duration { return min(grace/4, 2*time.Second) }

// serve runs the HTTP server on ln until ctx ends, then stops accepting
// and lets in-flight requests and streams finish as d says.
func serve(ctx context.Context, ln net.Listener, h http.Handler, d httpserve.Drain, log *slog.Logger) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// Bounds reading a whole request, so a body sent a byte at a time
		// cannot hold a connection for ever.
		ReadTimeout: 2 * time.Minute,
		// No WriteTimeout: streams legitimately run for minutes; the
		// upstream timeout bounds them instead.
		IdleTimeout: 120 * time.Second,
		ErrorLog:    slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("corral listening", slog.String("addr", ln.Addr().String()))
	stopping := d.Stopping
	d.Stopping = func() {
		log.Info("shutting down", slog.Duration("grace", d.Grace))
		if stopping != nil {
			stopping()
		}
	}
	cut, err := httpserve.ServeDrain(ctx, srv, ln, d)
	if cut {
		log.Warn("grace period over; closed remaining connections")
	}
	return err
}

func newLogger(w io.Writer, level string) (*slog.Logger, *accessline.Encoder) {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(strings.ToUpper(level))) // validated by config
	// JSON lines, durations as text; lines logged with a request's
	// context carry its trace_id and span_id when it is traced. The
	// encoder writes access lines as this logger would, without slog.
	return accessline.New(w, lv)
}

// reloadOnSIGHUP re-reads the tenants file on every SIGHUP until ctx ends
// or the returned stop is called; stop waits for the goroutine to exit.
func reloadOnSIGHUP(ctx context.Context, gw *gateway) (stop func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-hup:
				_, _ = gw.srv.Reload() // logged by the server either way
			case <-ctx.Done():
				return
			}
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}

// servePprof serves the runtime profiles on their own listener, apart from
// the API, so they are never reachable through the gateway's port.
func servePprof(addr string, log *slog.Logger) (bound string, stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", nil, fmt.Errorf("CORRAL_PPROF_ADDR: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	log.Info("pprof listening", slog.String("addr", ln.Addr().String()))
	return ln.Addr().String(), func() {
		_ = srv.Close()
		<-done
	}, nil
}

// lookupIn looks variables up in environ ("KEY=value" lines), as
// os.LookupEnv does in the process environment: run takes its environment
// as an argument so tests can give it one.
func lookupIn(environ []string) func(string) (string, bool) {
	return func(key string) (string, bool) {
		for i := len(environ) - 1; i >= 0; i-- {
			if k, v, ok := strings.Cut(environ[i], "="); ok && k == key {
				return v, true
			}
		}
		return "", false
	}
}

// logCloseFloor is the least time the log sink is given to write its last
// lines at exit, even when the shutdown's deadline has passed.
const logCloseFloor = 250 * time.Millisecond

// later is the later of a and b.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
