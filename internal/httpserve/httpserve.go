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

// Drain is how a server stops once its context ends.
type Drain struct {
	// Grace is the whole stop: in-flight requests may finish for this
	// long; then the remaining connections are closed.
	Grace time.Duration
	// Stopping, when not nil, is called once the context has ended, before
	// the shutdown starts.
	Stopping func()
	// Cut, when not nil, is called CutAhead before Grace runs out if the
	// shutdown has not finished: it should end what is still open (the
	// gateway ends its streams with an error event), so that those
	// requests are answered before their connections are closed, not cut
	// without a word. It must not block.
	Cut      func()
	CutAhead time.Duration
}

// Serve serves srv on ln until ctx ends (or serving fails), then stops
// accepting and lets in-flight requests finish for up to grace; after that
// the remaining connections are closed and cut is true. stopping, when not
// nil, is called once ctx has ended, before the shutdown starts. It closes
// ln. http.ErrServerClosed is not an error.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration, stopping func()) (cut bool, err error) {
	return ServeDrain(ctx, srv, ln, Drain{Grace: grace, Stopping: stopping})
}

// ServeDrain is Serve with a Drain: the whole shutdown, Cut included,
// ends within d.Grace of ctx ending.
func ServeDrain(ctx context.Context, srv *http.Server, ln net.Listener, d Drain) (cut bool, err error) {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return false, fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	if d.Stopping != nil {
		d.Stopping()
	}
	end := time.Now().Add(d.Grace)
	if d.Cut != nil {
		// One Shutdown under the whole deadline; Cut makes the handlers
		// still running return before it.
		t := time.AfterFunc(time.Until(end.Add(-d.CutAhead)), d.Cut)
		defer t.Stop()
	}
	sctx, cancel := context.WithDeadline(context.Background(), end)
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
