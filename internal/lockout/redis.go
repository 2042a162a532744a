package lockout

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// KeyPrefix starts every lockout key: a client's wrong tokens are
// "corral:v1:lockout:{203.0.113.7}:fails" and its lock
// "corral:v1:lockout:{203.0.113.7}:until". The braces are a Redis Cluster
// hash tag, so one script touches one slot. Both keys expire (a window
// after the last wrong token, at the lock's end): an address that stops
// guessing costs nothing.
const KeyPrefix = "corral:v1:lockout:"

//go:embed attempt.lua
var attemptSource string

// attemptScript runs by EVALSHA, falling back to EVAL when the server's
// script cache lacks it (redis.Script.Run does both).
var attemptScript = redis.NewScript(attemptSource)

// RedisOptions configures NewRedis. The zero value is ready to use.
type RedisOptions struct {
	// Rule is when to lock out. Default DefaultRule.
	Rule Rule
	// Timeout bounds one attempt (one round trip) on top of the caller's
	// context. Default 0: the caller's context and the client's own
	// timeouts only.
	Timeout time.Duration
}

// Redis counts attempts in Redis, where every instance sees them: five
// wrong on one instance lock the address out on all. Each attempt is one
// run of attempt.lua on Redis's clock.
type Redis struct {
	rdb     redis.Scripter
	rule    Rule
	timeout time.Duration
	// now overrides Redis TIME; set only by tests, so that windows and
	// locks can be crossed on a real redis-server without waiting.
	now func() time.Time
}

// NewRedis returns a Redis on rdb (a client, Cluster client or any
// redis.Scripter).
func NewRedis(rdb redis.Scripter, o RedisOptions) *Redis {
	if rdb == nil {
		panic("lockout: NewRedis with nil client")
	}
	return &Redis{rdb: rdb, rule: o.Rule.orDefault(), timeout: o.Timeout}
}

// keys are client's two keys.
func keys(client string) []string {
	tag := KeyPrefix + "{" + client + "}"
	return []string{tag + ":fails", tag + ":until"}
}

// Attempt is Throttle's Attempt, with Redis's error when it did not
// answer (Fallback then answers from its own count).
func (r *Redis) Attempt(ctx context.Context, client string, wrong bool) (Verdict, error) {
	var nonce [8]byte
	_, _ = rand.Read(nonce[:]) // crypto/rand.Read never fails (Go 1.24+)
	w := 0
	if wrong {
		w = 1
	}
	args := []any{w, r.rule.Failures, r.rule.Window.Milliseconds(), r.rule.Lock.Milliseconds(), hex.EncodeToString(nonce[:])}
	if r.now != nil {
		args = append(args, r.now().UnixMilli())
	}
	if r.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.timeout)
		defer cancel()
	}
	vals, err := attemptScript.Run(ctx, r.rdb, keys(client), args...).Int64Slice()
	if err != nil {
		return Verdict{}, fmt.Errorf("lockout: redis: %w", err)
	}
	if len(vals) != 3 {
		return Verdict{}, fmt.Errorf("lockout: redis: unexpected reply %v", vals)
	}
	return Verdict{Refused: vals[0] == 1, RetryAfter: time.Duration(vals[1]) * time.Millisecond, Locked: vals[2] == 1}, nil
}
