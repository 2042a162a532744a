// Package httpserve is the one serve-until-done of Corral's commands (the
// gateway, the mock model, the benchmark's bare proxy): serve until the
// context ends, then shut down gracefully, then cut what is left.
package httpserve

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"
)

// Serve serves srv on ln until ctx ends (or serving fails), then stops
// accepting and lets in-flight requests finish for up to grace; after that
// the remaining connections are closed and cut is true. stopping, when not
// nil, is called once ctx has ended, before the shutdown starts. It closes
// ln. http.ErrServerClosed is not an error.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, stopping func()) (cut bool, err error) {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return false, fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if stopping != nil {
		stopping()
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		cut, err = true, srv.Close()
	}
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return cut, fmt.Errorf("serve: %w", serr)
	}
	return cut, err
}
