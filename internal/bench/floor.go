package bench

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/http/pprof"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/corralhq/corral/internal/httpserve"
)

// The floor proxy runs as its own process: the harness starts its own
// executable again with these variables set. Any binary that embeds the
// harness (the corralbench command, the package's test binary) calls
// MaybeRunFloor first thing.
const (
	roleEnv          = "CORRAL_BENCH_ROLE" // "floor" or "static"
	floorAddrEnv     = "CORRAL_BENCH_FLOOR_ADDR"
	floorUpstreamEnv = "CORRAL_BENCH_FLOOR_UPSTREAM"
	// floorPprofEnv, set by -pprof, serves net/http/pprof on its own
	// address, as CORRAL_PPROF_ADDR does for the gateway, so the
	// footprint scenario can profile the floor's heap and goroutines.
	floorPprofEnv = "CORRAL_BENCH_FLOOR_PPROF"
)

// MaybeRunFloor serves the floor proxy (or the static handler, see
// static.go) and exits when this process was started as one by the
// harness; otherwise it returns at once.
func MaybeRunFloor() {
	role := os.Getenv(roleEnv)
	if role != "floor" && role != "static" {
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := serveRoleOf(ctx, role)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// serveRoleOf serves role until ctx ends, with the profiles beside it
// when floorPprofEnv asks for them.
func serveRoleOf(ctx context.Context, role string) error {
	if addr := os.Getenv(floorPprofEnv); addr != "" {
		pctx, cancel := context.WithCancel(ctx)
		done, err := servePprof(pctx, addr)
		if err != nil {
			cancel()
			return err
		}
		defer func() { cancel(); <-done }()
	}
	if role == "static" {
		return ServeStatic(ctx, os.Getenv(floorAddrEnv), os.Getenv(staticFileEnv))
	}
	return ServeFloor(ctx, os.Getenv(floorAddrEnv), os.Getenv(floorUpstreamEnv))
}

// ServeFloor runs the floor of the overhead comparison on addr until ctx
// ends: a bare net/http/httputil.ReverseProxy to upstream (a base URL such
// as http://127.0.0.1:9090), with a transport tuned the way a production
// proxy would be (a large idle pool, no compression, no HTTP/2 attempt)
// and every write flushed at once so SSE streams pass unbuffered. It does
// nothing else: no auth, no parsing, no logging. Whatever Corral costs
// beyond this is Corral's own work.
func ServeFloor(ctx context.Context, addr, upstream string) error {
	u, err := url.Parse(upstream)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return fmt.Errorf("upstream %q: want a base URL like http://127.0.0.1:9090", upstream)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) },
		Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConns:        0, // no global cap
			MaxIdleConnsPerHost: 4096,
			IdleConnTimeout:     90 * time.Second,
			DisableCompression:  true,
		},
		FlushInterval: -1,
		ErrorLog:      log.New(io.Discard, "", 0),
	}
	return serveRole(ctx, addr, rp)
}

// servePprof serves the runtime's profiles on addr until ctx ends; done
// yields once the listener is closed.
func servePprof(ctx context.Context, addr string) (done <-chan error, err error) {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("pprof: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	ch := make(chan error, 1)
	go func() {
		_, err := httpserve.Serve(ctx, srv, ln, time.Second, nil)
		ch <- err
	}()
	return ch, nil
}

// serveRole serves h on addr until ctx ends: the floor's and the static
// handler's server, with the same timeouts.
func serveRole(ctx context.Context, addr string, h http.Handler) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute}
	_, err = httpserve.Serve(ctx, srv, ln, time.Second, nil)
	return err
}
