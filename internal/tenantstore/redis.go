package tenantstore

import (
	"cmp"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// Redis keys of the tenant store. They share one hash tag, {admin}: a
// change, its audit event and the revision are written by one script,
// which on a Cluster must touch one slot. Admin state is small (a
// record per tenant) and rarely written, so one slot is no hot spot, and
// listing is one HGETALL, never a SCAN. None of these keys carries a
// TTL: they are durable state (see the README's Durable state in Redis).
const (
	redisTenants  = "corral:v1:{admin}:tenants" // hash: id → tenant record
	redisAudit    = "corral:v1:{admin}:audit"   // list: events, newest first
	redisRevision = "corral:v1:{admin}:rev"     // counter: one per change
	redisUsed     = "corral:v1:{admin}:used"    // hash: key id → last use (Unix s)
	// redisEpoch names the store's history (Revision.Epoch): written once,
	// and written anew by the first script that finds it missing, so a
	// Redis that lost its data is known for one by every instance.
	redisEpoch = "corral:v1:{admin}:epoch"
	// RedisChannel carries the id of each changed tenant to every instance.
	RedisChannel = "corral:v1:admin:changed"
)

//go:embed apply.lua
var applyLua string

var applyScript = redis.NewScript(applyLua)

//go:embed revision.lua
var revisionLua string

var revisionScript = redis.NewScript(revisionLua)

//go:embed touch.lua
var touchLua string

var touchScript = redis.NewScript(touchLua)

// Redis is the distributed Store. It takes a redis.UniversalClient, so a
// single server, Sentinel and Cluster all work.
type Redis struct {
	rdb     redis.UniversalClient
	timeout time.Duration
}

var _ Store = (*Redis)(nil)

// RedisOptions configure a Redis store.
type RedisOptions struct {
	// Timeout bounds each call. Default 2s.
	Timeout time.Duration
}

// NewRedis returns a store over rdb.
func NewRedis(rdb redis.UniversalClient, o RedisOptions) *Redis {
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	return &Redis{rdb: rdb, timeout: o.Timeout}
}

// List implements Store.
func (r *Redis) List(ctx context.Context) ([]Tenant, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	all, err := r.rdb.HGetAll(ctx, redisTenants).Result()
	if err != nil {
		return nil, fmt.Errorf("tenantstore: list: %w", err)
	}
	out := make([]Tenant, 0, len(all))
	for id, raw := range all {
		var t Tenant
		if err := json.Unmarshal([]byte(raw), &t); err != nil {
			return nil, fmt.Errorf("tenantstore: list: decode %q: %w", id, err)
		}
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b Tenant) int { return cmp.Compare(a.ID, b.ID) })
	return out, nil
}

// Get implements Store.
func (r *Redis) Get(ctx context.Context, id string) (Tenant, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	raw, err := r.rdb.HGet(ctx, redisTenants, id).Bytes()
	if errors.Is(err, redis.Nil) {
		return Tenant{}, ErrNotFound
	}
	if err != nil {
		return Tenant{}, fmt.Errorf("tenantstore: get: %w", err)
	}
	var t Tenant
	if err := json.Unmarshal(raw, &t); err != nil {
		return Tenant{}, fmt.Errorf("tenantstore: get: decode %q: %w", id, err)
	}
	return t, nil
}

// Apply implements Store: read the tenant, apply c in Go, and write the
// result with a script that does so only if the record is still the one
// read (compare-and-set on the whole record), with the audit event, the
// revision and the notification in the same script.
func (r *Redis) Apply(ctx context.Context, c Change, m Meta) (Tenant, Event, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	for range maxAttempts {
		cur, err := r.rdb.HGet(ctx, redisTenants, c.tenantID()).Bytes()
		switch {
		case errors.Is(err, redis.Nil):
			cur = nil
		case err != nil:
			return Tenant{}, Event{}, fmt.Errorf("tenantstore: apply: %w", err)
		}
		next, t, ev, gone, err := apply(c, cur, m)
		if err != nil {
			return Tenant{}, Event{}, err
		}
		evJSON, err := json.Marshal(ev)
		if err != nil {
			return Tenant{}, Event{}, fmt.Errorf("tenantstore: apply: %w", err)
		}
		args := []any{c.tenantID(), exists(cur), string(cur), exists(next), string(next), evJSON, RedisChannel, AuditKept, newEpoch()}
		for _, id := range gone {
			args = append(args, id)
		}
		res, err := applyScript.Run(ctx, r.rdb,
			[]string{redisTenants, redisAudit, redisRevision, redisUsed, redisEpoch}, args...).Slice()
		if err != nil {
			return Tenant{}, Event{}, fmt.Errorf("tenantstore: apply: %w", err)
		}
		rev, err := scriptRevision(res)
		if err != nil {
			return Tenant{}, Event{}, fmt.Errorf("tenantstore: apply: %w", err)
		}
		if rev.N > 0 {
			ev.Revision = rev
			return t, ev, nil
		}
	}
	return Tenant{}, Event{}, ErrContended
}

func exists(b []byte) string {
	if b == nil {
		return "0"
	}
	return "1"
}

// Audit implements Store.
func (r *Redis) Audit(ctx context.Context, limit int) ([]Event, error) {
	if limit <= 0 {
		return []Event{}, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	raws, err := r.rdb.LRange(ctx, redisAudit, 0, int64(min(limit, AuditKept))-1).Result()
	if err != nil {
		return nil, fmt.Errorf("tenantstore: audit: %w", err)
	}
	out := make([]Event, 0, len(raws))
	for _, raw := range raws {
		var e Event
		if err := json.Unmarshal([]byte(raw), &e); err != nil {
			return nil, fmt.Errorf("tenantstore: audit: decode: %w", err)
		}
		out = append(out, e)
	}
	return out, nil
}

// Revision implements Store: the counter and the epoch, read (and the
// epoch written when missing) by one script.
func (r *Redis) Revision(ctx context.Context) (Revision, error) {
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	res, err := revisionScript.Run(ctx, r.rdb, []string{redisRevision, redisEpoch}, newEpoch()).Slice()
	if err != nil {
		return Revision{}, fmt.Errorf("tenantstore: revision: %w", err)
	}
	rev, err := scriptRevision(res)
	if err != nil {
		return Revision{}, fmt.Errorf("tenantstore: revision: %w", err)
	}
	return rev, nil
}

// scriptRevision reads a script's {revision, epoch} answer.
func scriptRevision(res []any) (Revision, error) {
	if len(res) == 2 {
		n, nok := res[0].(int64)
		e, eok := res[1].(string)
		if nok && eok {
			return Revision{Epoch: e, N: n}, nil
		}
	}
	return Revision{}, fmt.Errorf("unexpected script answer %v", res)
}

// Notifications implements Store with a subscription to RedisChannel.
// go-redis resubscribes after a lost connection; what was published
// meanwhile is lost, which the Mirror's resync heals. Each (re)subscribe
// is sent as a notification too, so a reconnect reloads at once.
func (r *Redis) Notifications(ctx context.Context) <-chan struct{} {
	out := make(chan struct{}, 1)
	ps := r.rdb.Subscribe(ctx, RedisChannel)
	// Closing the subscription is what ends a Receive blocked on a quiet
	// channel; ctx alone may not interrupt the read.
	stop := context.AfterFunc(ctx, func() { _ = ps.Close() })
	go func() {
		defer stop()
		for {
			msg, err := ps.Receive(ctx)
			if ctx.Err() != nil {
				return
			}
			if err != nil {
				// Receive reconnects on the next call; wait a little so a
				// down server is not spun on.
				select {
				case <-ctx.Done():
					return
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			switch msg.(type) {
			case *redis.Message, *redis.Subscription:
				select {
				case out <- struct{}{}:
				default:
				}
			}
		}
	}()
	return out
}

// Touch implements Store with a script that skips keys their tenant no
// longer holds.
func (r *Redis) Touch(ctx context.Context, used map[string]Use) error {
	if len(used) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	args := make([]any, 0, 3*len(used))
	for id, u := range used {
		args = append(args, id, u.Tenant, strconv.FormatInt(u.At.Unix(), 10))
	}
	if err := touchScript.Run(ctx, r.rdb, []string{redisTenants, redisUsed}, args...).Err(); err != nil {
		return fmt.Errorf("tenantstore: touch: %w", err)
	}
	return nil
}

// LastUsed implements Store.
func (r *Redis) LastUsed(ctx context.Context, keyIDs []string) (map[string]time.Time, error) {
	out := make(map[string]time.Time, len(keyIDs))
	if len(keyIDs) == 0 {
		return out, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	vals, err := r.rdb.HMGet(ctx, redisUsed, keyIDs...).Result()
	if err != nil {
		return nil, fmt.Errorf("tenantstore: last used: %w", err)
	}
	for i, v := range vals {
		s, ok := v.(string)
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			out[keyIDs[i]] = time.Unix(n, 0).UTC()
		}
	}
	return out, nil
}
