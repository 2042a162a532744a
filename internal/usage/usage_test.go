package usage

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/corralhq/corral/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemory(t *testing.T) {
	m := NewMemory()
	m.Add("acme", Counters{Requests: 1, Hits: 1, TokensSaved: 10})
	m.Add("acme", Counters{Requests: 1, UpstreamCalls: 1, TokensUsed: 7})
	got, _ := m.Get(context.Background(), "acme")
	want := Counters{Requests: 2, Hits: 1, UpstreamCalls: 1, TokensUsed: 7, TokensSaved: 10}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	if got, _ := m.Get(context.Background(), "nobody"); !cmp.Equal(got, Counters{}) {
		t.Errorf("unknown tenant = %+v", got)
	}
}

func TestRedisAddsUpAcrossInstances(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour})
	b := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour})
	a.Add("acme", Counters{Requests: 3, Hits: 2})
	b.Add("acme", Counters{Requests: 4, UpstreamCalls: 1, TokensUsed: 50})
	if err := a.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	// b has not flushed: a sees only what Redis holds; b sees its own too.
	if got, _ := a.Get(ctx, "acme"); got.Requests != 3 {
		t.Errorf("a before b's flush = %+v", got)
	}
	if got, _ := b.Get(ctx, "acme"); got.Requests != 7 {
		t.Errorf("b with its unflushed part = %+v", got)
	}
	if err := b.Close(); err != nil { // Close flushes
		t.Fatal(err)
	}
	want := Counters{Requests: 7, Hits: 2, UpstreamCalls: 1, TokensUsed: 50}
	if got, _ := a.Get(ctx, "acme"); !cmp.Equal(got, want) {
		t.Errorf("after both flushed = %+v; want %+v", got, want)
	}
	_ = a.Close()
}

// TestRedisAddsUpDollarsByModel: cost, savings and the per-model split
// add up across instances through Redis, to the nano-dollar.
func TestRedisAddsUpDollarsByModel(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	a := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour})
	b := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour})
	a.Add("acme", Counters{UpstreamCalls: 1, CostNanos: 240_000, ByModel: map[string]ModelCounters{
		"gpt-4o-mini*": {UpstreamCalls: 1, InputTokens: 1000, OutputTokens: 200, CostNanos: 240_000},
	}})
	b.Add("acme", Counters{Requests: 2, SavedNanos: 480_000, UnpricedCalls: 1, ByModel: map[string]ModelCounters{
		"gpt-4o-mini*": {Requests: 2, SavedNanos: 480_000},
		"other":        {UpstreamCalls: 1, InputTokens: 5},
	}})
	for _, r := range []*Redis{a, b} {
		if err := r.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	want := Counters{Requests: 2, UpstreamCalls: 1, CostNanos: 240_000, SavedNanos: 480_000, UnpricedCalls: 1, ByModel: map[string]ModelCounters{
		"gpt-4o-mini*": {Requests: 2, UpstreamCalls: 1, InputTokens: 1000, OutputTokens: 200, CostNanos: 240_000, SavedNanos: 480_000},
		"other":        {UpstreamCalls: 1, InputTokens: 5},
	}}
	got, err := a.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	_ = a.Close()
	_ = b.Close()
}

func TestRedisKeepsCountersThroughAnOutage(t *testing.T) {
	srv := redistest.Start(t)
	if !srv.Stoppable() {
		t.Skip("external Redis")
	}
	ctx := context.Background()
	r := NewRedis(srv.Client(), RedisOptions{Interval: time.Hour, OpTimeout: 200 * time.Millisecond})
	defer r.Close()
	r.Add("acme", Counters{Requests: 5})
	srv.Stop()
	if err := r.Flush(ctx); err == nil {
		t.Fatal("flush to a stopped Redis succeeded")
	}
	srv.Restart()
	deadline := time.Now().Add(5 * time.Second)
	for r.Flush(ctx) != nil { // the client reconnects on its own
		if time.Now().After(deadline) {
			t.Fatal("flush never succeeded after restart")
		}
		time.Sleep(20 * time.Millisecond) // reconnect has no event to wait on
	}
	if got, _ := r.Get(ctx, "acme"); got.Requests != 5 {
		t.Errorf("after the outage = %+v; want the 5 requests kept", got)
	}
}

// flushDuringRead is a go-redis hook that, once armed, starts a flush of
// r right after a read of Redis (a Get's HGETALL, or the pipeline of a
// Days read) and before the read goes on to the unflushed counters.
type flushDuringRead struct {
	r     *Redis
	armed bool
	done  chan error
}

func (h *flushDuringRead) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *flushDuringRead) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if cmd.Name() == "hgetall" {
			h.flush()
		}
		return err
	}
}

func (h *flushDuringRead) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		if len(cmds) > 0 && cmds[0].Name() == "hgetall" {
			h.flush()
		}
		return err
	}
}

// flush starts the flush and gives it a moment to run: a flush that can
// slip between the read's two halves does so within it, and a flush that
// waits for the read (as it must) is left waiting.
func (h *flushDuringRead) flush() {
	if !h.armed {
		return
	}
	h.armed = false
	h.done = make(chan error, 1)
	go func() { h.done <- h.r.Flush(context.Background()) }()
	select {
	case err := <-h.done:
		h.done <- err
	case <-time.After(200 * time.Millisecond):
	}
}

// TestRedisReadDuringAFlush: a flush that runs while a Get or a Days read
// is between Redis and the unflushed counters is neither missed nor
// counted twice: the counters moving from one to the other are read once.
// (The console's pages read usage while every instance flushes each
// second; a read that missed a batch showed fewer requests than the next.)
func TestRedisReadDuringAFlush(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	rdb := srv.Client()
	hook := &flushDuringRead{}
	rdb.AddHook(hook)
	r := NewRedis(rdb, RedisOptions{Interval: time.Hour})
	defer r.Close()
	hook.r = r
	add := func() {
		r.Add("acme", Counters{Requests: 5, ByModel: map[string]ModelCounters{"gpt-4o": {Requests: 5}}})
	}

	add()
	hook.armed = true
	got, err := r.Get(ctx, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if err := <-hook.done; err != nil {
		t.Fatal(err)
	}
	if got.Requests != 5 {
		t.Errorf("Get during a flush: %d requests; want 5", got.Requests)
	}
	if got, _ := r.Get(ctx, "acme"); got.Requests != 5 {
		t.Errorf("Get after the flush: %d requests; want 5", got.Requests)
	}

	add()
	hook.armed = true
	day := time.Now()
	rows, err := r.Days(ctx, []string{"acme"}, day, day)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-hook.done; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].Requests != 10 {
		t.Errorf("Days during a flush: %+v; want one row of 10 requests", rows)
	}
}
