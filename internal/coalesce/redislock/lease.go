package redislock

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

var (
	//go:embed renew.lua
	renewSource string
	//go:embed release.lua
	releaseSource string
)

// The scripts run by EVALSHA and fall back to EVAL when the server's script
// cache lacks them (after a restart or SCRIPT FLUSH); redis.Script.Run does
// both.
var (
	renewScript   = redis.NewScript(renewSource)
	releaseScript = redis.NewScript(releaseSource)
)

// Lease is a held lock. It renews the lock in a goroutine it owns until
// Release, and reports through Lost when the lock stopped being its own.
// The holder must call Release (typically deferred), also after Lost: it is
// what stops the goroutine.
type Lease struct {
	l     *Locker
	name  string
	token string

	stop context.CancelFunc // ends the renewal goroutine and its in-flight command
	done chan struct{}      // closed when the renewal goroutine has exited
	lost chan struct{}      // closed by the renewal goroutine only

	mu       sync.Mutex // serialises Release; protects released
	released bool
}

func newLease(l *Locker, name, token string, acquired time.Time) *Lease {
	ctx, stop := context.WithCancel(context.Background())
	le := &Lease{
		l:     l,
		name:  name,
		token: token,
		stop:  stop,
		done:  make(chan struct{}),
		lost:  make(chan struct{}),
	}
	go le.renew(ctx, acquired)
	return le
}

// Name is the lock's name.
func (le *Lease) Name() string { return le.name }

// Lost is closed when a renewal finds the lock no longer ours: deleted,
// expired and taken by another holder, or not renewed for a whole TTL
// because Redis kept failing. A leader that sees it should finish (its
// answer is still worth storing) but expect a successor to be working too.
// Release does not close it.
func (le *Lease) Lost() <-chan struct{} { return le.lost }

// renew extends the lock every TTL/3 until ctx ends. A Redis error is
// retried at the next tick, because the key is still ours until its TTL
// runs out; only when a whole TTL has passed since the last renewal that
// Redis confirmed (measured from before that command was sent, so the
// estimate errs early) does it give the lock up as lost.
func (le *Lease) renew(ctx context.Context, lastOK time.Time) {
	defer close(le.done)
	t := time.NewTicker(le.l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		sent := time.Now()
		ours, err := le.extend(ctx)
		switch {
		case ctx.Err() != nil:
			return // released meanwhile; the outcome no longer matters
		case err == nil && ours:
			lastOK = sent
		case err == nil: // gone, or someone else's
			close(le.lost)
			return
		case time.Since(lastOK) >= le.l.ttl: // Redis failing for a whole TTL
			close(le.lost)
			return
		}
		// A Redis error within the TTL: try again at the next tick.
	}
}

func (le *Lease) extend(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, le.l.opTimeout)
	defer cancel()
	n, err := renewScript.Run(ctx, le.l.rdb, []string{le.name}, le.token, le.l.ttl.Milliseconds()).Int64()
	return n == 1, err
}

// Release stops renewal, waits for the renewal goroutine to exit, then
// deletes the lock with compare-and-delete: a lock that someone else now
// holds is left alone. It is idempotent; after a successful Release further
// calls return nil without touching Redis, and after a failed one a call
// tries again (the lock also expires by itself after one TTL).
//
// Release runs even when ctx is already cancelled or past its deadline: it
// keeps ctx's values but not its cancellation, bounded by OpTimeout. A
// leader typically releases with the context of the work that just ended,
// and leaving the lock behind would make every waiter sit out a full TTL.
func (le *Lease) Release(ctx context.Context) error {
	le.stop()
	<-le.done // at most one in-flight renewal, bounded by OpTimeout

	le.mu.Lock()
	defer le.mu.Unlock()
	if le.released {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), le.l.opTimeout)
	defer cancel()
	if err := releaseScript.Run(ctx, le.l.rdb, []string{le.name}, le.token).Err(); err != nil {
		return fmt.Errorf("redislock: release: %w", err)
	}
	le.released = true
	return nil
}
