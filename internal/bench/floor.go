package bench

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
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
	var err error
	if role == "static" {
		err = ServeStatic(ctx, os.Getenv(floorAddrEnv), os.Getenv(staticFileEnv))
	} else {
		err = ServeFloor(ctx, os.Getenv(floorAddrEnv), os.Getenv(floorUpstreamEnv))
	}
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		os.Exit(1)
	}
	os.Exit(0)
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
