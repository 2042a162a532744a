package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultChannel is the pub/sub channel done notifications use.
const DefaultChannel = "corral:v1:done"

// DefaultPingInterval is how long a quiet subscription waits before it
// checks its connection with PING.
const DefaultPingInterval = 5 * time.Second

// Resubscription backoff after a failed session: doubled per failure up to
// the maximum, reset once a session has subscribed.
const (
	backoffMin = 10 * time.Millisecond
	backoffMax = time.Second
)

// BusClient is the part of go-redis the Bus uses. Every
// redis.UniversalClient satisfies it.
type BusClient interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
	Publish(ctx context.Context, channel string, message any) *redis.IntCmd
}

var _ BusClient = redis.UniversalClient(nil)

// BusOptions configures NewBus. The zero value is ready to use.
type BusOptions struct {
	// Channel is the pub/sub channel. Default "corral:v1:done"
	// (DefaultChannel). All instances of one deployment must agree on it.
	Channel string
	// OpTimeout bounds each PUBLISH, the SUBSCRIBE confirmation and the
	// reply to a health-check PING. Default 500ms (DefaultOpTimeout).
	OpTimeout time.Duration
	// PingInterval is how long the subscription may stay silent before the
	// Bus sends PING; no reply within OpTimeout means the connection is dead
	// (for example half-open after a network partition) and the Bus
	// resubscribes on a new one. Default 5s (DefaultPingInterval).
	PingInterval time.Duration
	// Logger receives subscription lost and restored events, the only
	// faults of the Bus no caller sees. Default slog.Default().
	Logger *slog.Logger
}

// Bus carries "done" notifications between instances on one Redis pub/sub
// channel. One Bus per process holds exactly one subscription and fans each
// message out to the local watchers of its name; it never subscribes per
// waiter. It is safe for concurrent use.
//
// Delivery is best effort: a notification published while the subscription
// is down (or before it is first confirmed, see Ready) is lost, and a
// watcher must also poll. A wake-up means "look now", not a guarantee.
type Bus struct {
	rdb          BusClient
	channel      string
	opTimeout    time.Duration
	pingInterval time.Duration
	log          *slog.Logger

	ctx        context.Context // ends the subscription goroutine; cancelled by Close
	cancel     context.CancelFunc
	done       chan struct{} // closed when the subscription goroutine has exited
	ready      chan struct{} // closed at the first confirmed subscription
	subscribed atomic.Bool   // the current session is subscribed
	down       bool          // a loss was logged and no subscription since; subscription goroutine only

	mu     sync.Mutex    // protects ps and closed
	ps     *redis.PubSub // the current session's subscription, nil between sessions
	closed bool

	watchMu sync.Mutex                            // protects watch
	watch   map[string]map[chan struct{}]struct{} // name → its watchers' channels
}

// NewBus returns a Bus on rdb and starts its subscription goroutine, which
// runs until Close. It does not wait for Redis: Ready tells when the
// subscription is confirmed. It panics on a nil client or negative
// durations, which are programmer errors.
func NewBus(rdb BusClient, opts BusOptions) *Bus {
	if rdb == nil {
		panic("redislock: NewBus with nil client")
	}
	if opts.OpTimeout < 0 || opts.PingInterval < 0 {
		panic("redislock: negative BusOptions duration")
	}
	if opts.Channel == "" {
		opts.Channel = DefaultChannel
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = DefaultOpTimeout
	}
	if opts.PingInterval == 0 {
		opts.PingInterval = DefaultPingInterval
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &Bus{
		rdb:          rdb,
		channel:      opts.Channel,
		opTimeout:    opts.OpTimeout,
		pingInterval: opts.PingInterval,
		log:          opts.Logger,
		ctx:          ctx,
		cancel:       cancel,
		done:         make(chan struct{}),
		ready:        make(chan struct{}),
		watch:        make(map[string]map[chan struct{}]struct{}),
	}
	go b.run()
	return b
}

// Ready is closed once the subscription is first confirmed by Redis. It
// stays closed across later outages (see Subscribed) and never closes if
// the Bus is closed first, so wait on it together with a context.
func (b *Bus) Ready() <-chan struct{} { return b.ready }

// Subscribed reports whether the subscription is confirmed right now; it is
// false while Redis is unreachable and the Bus is resubscribing. For
// readiness reports and metrics.
func (b *Bus) Subscribed() bool { return b.subscribed.Load() }

// Publish announces that name is done: PUBLISH channel name, bounded by
// OpTimeout.
func (b *Bus) Publish(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, b.opTimeout)
	defer cancel()
	if err := b.rdb.Publish(ctx, b.channel, name).Err(); err != nil {
		return fmt.Errorf("redislock: publish: %w", err)
	}
	return nil
}

// Close ends the subscription and waits for its goroutine to exit. Channels
// from Watch are not closed by it. It is idempotent and returns nil.
func (b *Bus) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		<-b.done
		return nil
	}
	b.closed = true
	b.cancel()
	ps := b.ps
	b.mu.Unlock()
	if ps != nil {
		_ = ps.Close() // unblocks a receive in progress; the session also closes it
	}
	<-b.done
	return nil
}

// run keeps one subscription alive until Close: a session subscribes and
// dispatches until its connection fails, then run waits with backoff and
// starts a new session on a new connection. A fresh PubSub per session,
// rather than go-redis's in-place reconnect alone, also recovers from a
// half-open connection that only the missing PING reply reveals.
func (b *Bus) run() {
	defer close(b.done)
	backoff := backoffMin
	for {
		err := b.session()
		if b.subscribed.Swap(false) {
			backoff = backoffMin
		}
		if b.ctx.Err() != nil {
			return
		}
		if !b.down {
			b.down = true
			b.log.Warn("redislock: done bus unsubscribed; waiters fall back to polling",
				"channel", b.channel, "err", err)
		}
		t := time.NewTimer(backoff)
		select {
		case <-b.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(2*backoff, backoffMax)
	}
}

// session runs one subscription until it fails or the Bus closes.
func (b *Bus) session() error {
	ps := b.rdb.Subscribe(b.ctx) // no channels: no I/O yet
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		_ = ps.Close()
		return nil
	}
	b.ps = ps
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.ps = nil
		b.mu.Unlock()
		_ = ps.Close()
	}()

	ctx, cancel := context.WithTimeout(b.ctx, b.opTimeout)
	err := ps.Subscribe(ctx, b.channel)
	cancel()
	if err != nil {
		return fmt.Errorf("redislock: subscribe: %w", err)
	}
	awaiting := true // a reply is due: the SUBSCRIBE confirmation or a PONG
	for {
		wait := b.pingInterval
		if awaiting {
			wait = b.opTimeout
		}
		msg, err := ps.ReceiveTimeout(b.ctx, wait)
		if err != nil {
			if !isTimeout(err) || b.ctx.Err() != nil {
				return fmt.Errorf("redislock: receive: %w", err)
			}
			if awaiting {
				return errors.New("redislock: no reply from Redis within OpTimeout")
			}
			ctx, cancel := context.WithTimeout(b.ctx, b.opTimeout)
			err := ps.Ping(ctx)
			cancel()
			if err != nil {
				return fmt.Errorf("redislock: ping: %w", err)
			}
			awaiting = true
			continue
		}
		awaiting = false // any message proves the connection alive
		switch m := msg.(type) {
		case *redis.Subscription:
			if m.Kind == "subscribe" && m.Channel == b.channel {
				b.onSubscribed()
			}
		case *redis.Message:
			b.fire(m.Payload)
		}
	}
}

// onSubscribed records a confirmed subscription.
func (b *Bus) onSubscribed() {
	b.subscribed.Store(true)
	if b.down {
		b.down = false
		b.log.Info("redislock: done bus subscribed again", "channel", b.channel)
	}
	select {
	case <-b.ready:
	default:
		close(b.ready) // only the subscription goroutine gets here
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
