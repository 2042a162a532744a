package coalesce_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sync/semaphore"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/coalesce/flight"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/wire/openai"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const (
	answer = `{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1}}`
	hash   = "0000000000000000000000000000000000000000000000000000000000000001"
)

// The events of a streamed answer; the last is the final event.
var streamEvents = []string{
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hel\"},\"finish_reason\":null}]}\n\n",
	"data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"lo\"},\"finish_reason\":\"stop\"}]}\n\n",
	"data: [DONE]\n\n",
}

type instance struct {
	co  *coalesce.Coalescer
	up  *caller
	obs *observer
}

// newInstance is one gateway instance's flight layer; with a cluster it
// shares it with the other instances, as Redis would.
func newInstance(t *testing.T, cl *cluster, store coalesce.Store, call func(context.Context, *coalesce.Request) (*coalesce.Response, error), opts ...func(*coalesce.Options)) *instance {
	t.Helper()
	in := &instance{up: &caller{call: call}, obs: &observer{}}
	o := coalesce.Options{
		Store:        store,
		Caller:       in.up,
		Observer:     in.obs,
		PollInterval: time.Hour, // every wake-up in these tests is a done notice
		WaitTimeout:  time.Hour,
		LockTTL:      40 * time.Millisecond,
	}
	if cl != nil {
		o.Locker, o.Bus, o.Streams = cl, cl, cl
	}
	for _, f := range opts {
		f(&o)
	}
	co, err := coalesce.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := co.Wait(ctx); err != nil {
			t.Errorf("flights still running at the end of the test: %v", err)
		}
	})
	in.co = co
	return in
}

func request(stream bool) func() *coalesce.Request {
	return func() *coalesce.Request {
		return &coalesce.Request{
			Tenant: "acme", Hash: hash, Endpoint: "/chat/completions", Model: "m",
			Format: openai.Format{}, Stream: stream, TTL: time.Hour, NegativeTTL: time.Minute,
			Body: []byte(`{"model":"m"}`), Leaders: semaphore.NewWeighted(8), MaxLeaders: 8,
		}
	}
}

func result(t *testing.T, f *coalesce.Flight) (coalesce.Outcome, error) {
	t.Helper()
	select {
	case <-f.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("flight did not end")
	}
	return f.Result()
}

var responseKey = keying.Name("acme", hash, keying.Response)

// TestLeader: the first caller leads, calls upstream once, stores the
// answer with its usage; the next request finds it with Lookup.
func TestLeader(t *testing.T) {
	cl := newCluster()
	in := newInstance(t, nil, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		return jsonAnswer(answer), nil
	})
	f := in.co.Join("acme", hash, request(false))
	out, err := result(t, f)
	f.Leave()
	if err != nil || !f.Leader() || out.Source != coalesce.Miss || !out.Stored || string(out.Entry.Body) != answer {
		t.Fatalf("leader: %+v, %v; want a stored MISS", out, err)
	}
	if e := cl.entry(responseKey); e == nil || e.PromptTokens != 3 || e.CompletionTokens != 1 {
		t.Fatalf("stored entry %+v; want the answer with its usage", e)
	}
	hit, ok := in.co.Lookup(context.Background(), request(false)())
	if !ok || hit.Source != coalesce.Hit || in.up.count() != 1 {
		t.Errorf("lookup after the flight: %+v %v with %d calls; want a HIT and one call", hit, ok, in.up.count())
	}
}

// TestWaiter: a second caller for the same prompt joins the leader's
// flight and shares its one upstream call.
func TestWaiter(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	in := newInstance(t, nil, newCluster(), func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		close(started)
		<-release
		return jsonAnswer(answer), nil
	})
	leader := in.co.Join("acme", hash, request(false))
	defer leader.Leave()
	<-started
	waiter := in.co.Join("acme", hash, func() *coalesce.Request { panic("a waiter builds no request") })
	defer waiter.Leave()
	close(release)
	lo, lerr := result(t, leader)
	wo, werr := result(t, waiter)
	if lerr != nil || werr != nil || waiter.Leader() || waiter.Source(wo) != coalesce.Coalesced || leader.Source(lo) != coalesce.Miss {
		t.Fatalf("leader %v %v, waiter %v %v; want MISS and COALESCED", leader.Source(lo), lerr, waiter.Source(wo), werr)
	}
	if string(wo.Entry.Body) != answer || in.up.count() != 1 {
		t.Errorf("waiter got %q after %d upstream calls; want the answer after one", wo.Entry.Body, in.up.count())
	}
}

// TestWaiterOnAnotherInstance: instance B finds A's lock, waits for A's
// done notice and serves A's stored answer without calling upstream.
func TestWaiterOnAnotherInstance(t *testing.T) {
	cl := newCluster()
	started, release := make(chan struct{}), make(chan struct{})
	a := newInstance(t, cl, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		close(started)
		<-release
		return jsonAnswer(answer), nil
	})
	b := newInstance(t, cl, cl, nil) // B must never call upstream
	fa := a.co.Join("acme", hash, request(false))
	defer fa.Leave()
	<-started
	fb := b.co.Join("acme", hash, request(false))
	defer fb.Leave()
	<-cl.watched // B waits for A's notice
	close(release)
	if out, err := result(t, fa); err != nil || out.Source != coalesce.Miss || !out.Stored {
		t.Fatalf("A: %+v %v; want a stored MISS", out, err)
	}
	out, err := result(t, fb)
	if err != nil || fb.Source(out) != coalesce.Coalesced || string(out.Entry.Body) != answer {
		t.Fatalf("B: %+v %v; want A's answer, COALESCED", out, err)
	}
	if b.up.count() != 0 {
		t.Errorf("B called upstream %d times", b.up.count())
	}
}

// TestTakeover: the leader on another instance lets its lock go without
// an answer (it failed, or died); the waiter takes the lock over and
// calls upstream itself, and says so.
func TestTakeover(t *testing.T) {
	cl := newCluster()
	release := cl.hold(keying.Name("acme", hash, keying.Lock)) // the other instance's leader
	b := newInstance(t, cl, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		return jsonAnswer(answer), nil
	})
	f := b.co.Join("acme", hash, request(false))
	defer f.Leave()
	<-cl.watched
	if err := release(context.Background()); err != nil {
		t.Fatal(err)
	}
	_ = cl.Publish(context.Background(), responseKey) // the leader's last act: "done", with nothing stored
	out, err := result(t, f)
	if err != nil || out.Source != coalesce.Miss || !out.Stored || b.up.count() != 1 || b.obs.tookOver() != 1 {
		t.Errorf("after the leader left: %+v %v, %d calls, %d takeovers; want a stored MISS after one call and one takeover",
			out, err, b.up.count(), b.obs.tookOver())
	}
}

// mirrored is a stream led on instance A (its upstream body written
// through pw) and followed on instance B, which has read A's first event
// from the live stream: cur reads on from there, within ctx.
type mirrored struct {
	pw     *io.PipeWriter
	fa, fb *coalesce.Flight
	cur    *flight.Cursor
	ctx    context.Context
}

func startMirrored(t *testing.T, leaderOpts ...func(*coalesce.Options)) mirrored {
	t.Helper()
	cl := newCluster()
	pr, pw := io.Pipe()
	a := newInstance(t, cl, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		return &coalesce.Response{Status: 200, EventStream: true, Body: pr,
			Header: map[string][]string{"Content-Type": {"text/event-stream"}}}, nil
	}, leaderOpts...)
	b := newInstance(t, cl, cl, nil)
	m := mirrored{pw: pw, fa: a.co.Join("acme", hash, request(true))}
	t.Cleanup(m.fa.Leave)
	<-m.fa.Streaming()
	if _, err := io.WriteString(pw, streamEvents[0]); err != nil {
		t.Fatal(err)
	}
	<-cl.appended // A published its first event
	m.fb = b.co.Join("acme", hash, request(true))
	t.Cleanup(m.fb.Leave)
	<-m.fb.Streaming()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	t.Cleanup(cancel)
	m.ctx, m.cur = ctx, m.fb.Cursor()
	first, err := m.cur.Next(ctx)
	if err != nil || len(first) != 1 || string(first[0]) != streamEvents[0] {
		t.Fatalf("B's first batch %q, %v; want A's first event while A is still streaming", first, err)
	}
	return m
}

// TestMirror: a streaming request on instance B follows instance A's
// live stream as it is written, and gets the assembled answer at its end.
func TestMirror(t *testing.T) {
	m := startMirrored(t)
	pw, fa, fb, cur, ctx := m.pw, m.fa, m.fb, m.cur, m.ctx
	if _, err := io.WriteString(pw, strings.Join(streamEvents[1:], "")); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		batch, err := cur.Next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("B's stream broke: %v", err)
		}
		for _, ev := range batch {
			got = append(got, string(ev))
		}
	}
	_ = pw.Close()
	if strings.Join(got, "") != strings.Join(streamEvents[1:], "") {
		t.Errorf("B's stream after the first event = %q; want the rest of A's", got)
	}
	streamed := fb.Streamed()
	if fb.StreamSource() != coalesce.Coalesced || streamed.Entry == nil || !strings.Contains(string(streamed.Entry.Body), `"content":"Hello"`) {
		t.Errorf("B: %v, %+v; want COALESCED with the assembled answer", fb.StreamSource(), streamed)
	}
	if _, err := result(t, fb); err != nil {
		t.Errorf("B's flight: %v", err)
	}
	if out, err := result(t, fa); err != nil || !out.Stored || fa.StreamSource() != coalesce.Miss {
		t.Errorf("A: %+v %v; want a stored MISS", out, err)
	}
}

// TestFailedLeader: a failed call is every waiter's answer, stores
// nothing, and the next request flies again.
func TestFailedLeader(t *testing.T) {
	refused := errors.New("connection refused")
	started, release := make(chan struct{}, 2), make(chan struct{})
	cl := newCluster()
	in := newInstance(t, nil, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		started <- struct{}{}
		<-release
		return nil, refused
	})
	leader := in.co.Join("acme", hash, request(false))
	defer leader.Leave()
	<-started
	waiter := in.co.Join("acme", hash, request(false))
	defer waiter.Leave()
	close(release)
	for _, f := range []*coalesce.Flight{leader, waiter} {
		if out, err := result(t, f); !errors.Is(err, refused) || out.Entry != nil {
			t.Errorf("leader %v: %+v, %v; want the call's error and no entry", f.Leader(), out, err)
		}
	}
	if e := cl.entry(responseKey); e != nil {
		t.Errorf("a failure was stored: %+v", e)
	}
	again := in.co.Join("acme", hash, request(false))
	defer again.Leave()
	_, err := result(t, again)
	if !again.Leader() || !errors.Is(err, refused) || in.up.count() != 2 {
		t.Errorf("the next request: leader %v, %v after %d calls; want a new flight and a second call", again.Leader(), err, in.up.count())
	}
}

// TestDeterministicFailureIsRemembered: a 404 is stored as the prompt's
// negative entry, a 500 is not.
func TestDeterministicFailureIsRemembered(t *testing.T) {
	tests := []struct {
		give       int
		wantStored bool
	}{
		{404, true},
		{500, false},
	}
	for _, tt := range tests {
		cl := newCluster()
		in := newInstance(t, nil, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
			r := jsonAnswer(`{"error":{"message":"no such model","code":"model_not_found"}}`)
			r.Status = tt.give
			return r, nil
		})
		f := in.co.Join("acme", hash, request(false))
		out, err := result(t, f)
		f.Leave()
		stored := cl.entry(keying.Name("acme", hash, keying.Negative)) != nil
		if err != nil || out.Entry.Status != tt.give || out.Stored != tt.wantStored || stored != tt.wantStored {
			t.Errorf("%d: %+v %v, negative entry %v; want stored=%v", tt.give, out, err, stored, tt.wantStored)
		}
	}
}

// TestUpstreamAuthIsTyped: Corral's own credential refused is a typed
// error, never an answer to pass through.
func TestUpstreamAuthIsTyped(t *testing.T) {
	in := newInstance(t, nil, newCluster(), func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		r := jsonAnswer(`{"error":{"message":"bad key"}}`)
		r.Status = 401
		return r, nil
	})
	f := in.co.Join("acme", hash, request(false))
	defer f.Leave()
	if out, err := result(t, f); !errors.Is(err, coalesce.ErrUpstreamAuth) || out.Entry != nil {
		t.Errorf("401: %+v, %v; want ErrUpstreamAuth", out, err)
	}
}

// BenchmarkLookupHit is the hit path's flight-layer share: one store
// read, in parallel.
func BenchmarkLookupHit(b *testing.B) {
	cl := newCluster()
	_ = cl.Set(context.Background(), responseKey, &entry.Entry{Status: 200, Body: []byte(answer)}, time.Hour)
	co, err := coalesce.New(coalesce.Options{Store: cl, Caller: &caller{}})
	if err != nil {
		b.Fatal(err)
	}
	req := request(false)()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if _, ok := co.Lookup(ctx, req); !ok {
				b.Error("miss")
				return
			}
		}
	})
}

// BenchmarkJoinShared is a flight joined by many callers at once; the
// upstream answers at once.
func BenchmarkJoinShared(b *testing.B) {
	co, err := coalesce.New(coalesce.Options{Store: newCluster(), Caller: &caller{call: func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
		return jsonAnswer(answer), nil
	}}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			f := co.Join("acme", hash, request(false))
			<-f.Done()
			f.Leave()
		}
	})
}

// TestMirrorLeaderGone: the instance streaming the answer stops renewing
// its lock mid-stream and never writes the end; the mirror ends its
// followers' stream with ErrLeaderGone instead of hanging.
func TestMirrorLeaderGone(t *testing.T) {
	cl := newCluster()
	release := cl.hold(keying.Name("acme", hash, keying.Lock)) // the other instance's leader
	streamKey := keying.Name("acme", hash, keying.Stream)
	if err := cl.Append(context.Background(), streamKey, [][]byte{[]byte(streamEvents[0])}); err != nil {
		t.Fatal(err)
	}
	<-cl.appended
	b := newInstance(t, cl, cl, nil)
	f := b.co.Join("acme", hash, request(true))
	defer f.Leave()
	<-f.Streaming()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cur := f.Cursor()
	if first, err := cur.Next(ctx); err != nil || len(first) != 1 {
		t.Fatalf("first batch %q, %v; want the leader's first event", first, err)
	}
	if err := release(context.Background()); err != nil { // the leader's lock lapses
		t.Fatal(err)
	}
	if _, err := cur.Next(ctx); !errors.Is(err, coalesce.ErrLeaderGone) {
		t.Fatalf("stream after the leader left: %v; want ErrLeaderGone", err)
	}
	var se *coalesce.StreamError
	if _, err := result(t, f); !errors.As(err, &se) || !errors.Is(err, coalesce.ErrLeaderGone) {
		t.Errorf("flight: %v; want a StreamError for ErrLeaderGone", err)
	}
}

// stuckReads is Streams whose reads block, whatever their context, until
// release is closed: an XREAD BLOCK on a socket that a cancel does not
// interrupt. reading says a read has begun.
type stuckReads struct {
	*cluster
	reading chan struct{}
	release chan struct{}
}

func (s *stuckReads) Read(ctx context.Context, _, after string, _ time.Duration) (coalesce.StreamBatch, error) {
	select {
	case s.reading <- struct{}{}:
	default:
	}
	<-s.release
	return coalesce.StreamBatch{Next: after}, ctx.Err()
}

// TestMirrorStoppedBeforeFirstEvent: an instance that stops while its
// mirror's first read is still blocked starts its followers' streams and
// ends them with the shutdown at once, not when the read returns.
func TestMirrorStoppedBeforeFirstEvent(t *testing.T) {
	cl := newCluster()
	release := cl.hold(keying.Name("acme", hash, keying.Lock)) // the other instance's leader
	if err := cl.Append(context.Background(), keying.Name("acme", hash, keying.Stream), nil); err != nil {
		t.Fatal(err) // its live stream exists, no event yet
	}
	<-cl.appended
	stuck := &stuckReads{cluster: cl, reading: make(chan struct{}, 1), release: make(chan struct{})}
	b := newInstance(t, cl, cl, nil, func(o *coalesce.Options) { o.Streams = stuck })
	f := b.co.Join("acme", hash, request(true))
	defer f.Leave()
	<-stuck.reading
	b.co.Stop()
	select {
	case <-f.Streaming():
	case <-time.After(5 * time.Second):
		t.Fatal("the followers' stream did not start after Stop while the mirror's read was blocked")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := f.Cursor().Next(ctx); !errors.Is(err, coalesce.ErrShutdown) {
		t.Errorf("followers' stream ended with %v; want ErrShutdown", err)
	}
	close(stuck.release)
	if _, err := result(t, f); !errors.Is(err, coalesce.ErrShutdown) {
		t.Errorf("flight: %v; want ErrShutdown", err)
	}
	if err := release(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// failingAppends is Streams whose Appends fail once fail is set (Redis
// refusing a write mid-stream).
type failingAppends struct {
	*cluster
	fail atomic.Bool
}

func (s *failingAppends) Append(ctx context.Context, key string, events [][]byte) error {
	if s.fail.Load() {
		return errors.New("OOM command not allowed when used memory > 'maxmemory'")
	}
	return s.cluster.Append(ctx, key, events)
}

// TestLiveStreamGapEndsFollowers: when the leader cannot write some events
// to its live stream, the followers on other instances end with an error
// instead of relaying the rest of the answer with those events missing;
// the leader's own answer is stored whole.
func TestLiveStreamGapEndsFollowers(t *testing.T) {
	var streams *failingAppends
	m := startMirrored(t, func(o *coalesce.Options) {
		streams = &failingAppends{cluster: o.Streams.(*cluster)}
		o.Streams = streams
	})
	pw, fa, fb, cur, ctx := m.pw, m.fa, m.fb, m.cur, m.ctx
	streams.fail.Store(true)
	if _, err := io.WriteString(pw, strings.Join(streamEvents[1:], "")); err != nil {
		t.Fatal(err)
	}
	_ = pw.Close()
	for {
		batch, err := cur.Next(ctx)
		if err != nil {
			if !errors.Is(err, coalesce.ErrLiveStreamGap) {
				t.Errorf("B's stream ended with %v; want ErrLiveStreamGap", err)
			}
			break
		}
		if len(batch) > 0 {
			t.Fatalf("B got %q after A's write failed; want no event past the gap", batch)
		}
	}
	if _, err := result(t, fb); !errors.Is(err, coalesce.ErrLiveStreamGap) {
		t.Errorf("B's flight: %v; want ErrLiveStreamGap", err)
	}
	if out, err := result(t, fa); err != nil || !out.Stored || !strings.Contains(string(out.Entry.Body), `"content":"Hello"`) {
		t.Errorf("A: %+v %v; want its whole answer stored", out, err)
	}
}

// signalReads is Streams that says when a read begins.
type signalReads struct {
	*cluster
	reads chan struct{}
}

func (s *signalReads) Read(ctx context.Context, key, after string, block time.Duration) (coalesce.StreamBatch, error) {
	select {
	case s.reads <- struct{}{}:
	default:
	}
	return s.cluster.Read(ctx, key, after, block)
}

// TestMirrorLeaderGoneWithItsAnswerStored: the other instance's leader
// stored its answer and left without writing the end marker. Followers
// that read every event end cleanly; followers that read none are
// answered from the entry, not from a stream; followers that read only
// some end with an error, never with a stream cut short as if complete.
func TestMirrorLeaderGoneWithItsAnswerStored(t *testing.T) {
	for _, tt := range []struct {
		name   string
		events []string
	}{
		{"every event read", streamEvents},
		{"none read", nil},
		{"some read", streamEvents[:1]},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster()
			release := cl.hold(keying.Name("acme", hash, keying.Lock)) // the other instance's leader
			var evs [][]byte
			for _, ev := range tt.events {
				evs = append(evs, []byte(ev))
			}
			if err := cl.Append(context.Background(), keying.Name("acme", hash, keying.Stream), evs); err != nil {
				t.Fatal(err)
			}
			<-cl.appended
			reads := &signalReads{cluster: cl, reads: make(chan struct{}, 1)}
			b := newInstance(t, cl, cl, nil, func(o *coalesce.Options) { o.Streams = reads })
			f := b.co.Join("acme", hash, request(true))
			defer f.Leave()
			<-reads.reads // mirroring
			// The leader stores its answer and leaves, its end marker lost.
			if err := cl.Set(context.Background(), responseKey, &entry.Entry{Status: 200, Body: []byte(answer)}, time.Hour); err != nil {
				t.Fatal(err)
			}
			if err := release(context.Background()); err != nil {
				t.Fatal(err)
			}
			out, err := result(t, f)
			switch tt.name {
			case "every event read":
				if err != nil || out.Entry == nil || !f.IsStreaming() {
					t.Fatalf("flight: %+v %v streaming=%v; want the entry, streamed", out, err, f.IsStreaming())
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				var got []string
				cur := f.Cursor()
				for {
					batch, err := cur.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						t.Fatalf("stream: %v", err)
					}
					for _, ev := range batch {
						got = append(got, string(ev))
					}
				}
				if strings.Join(got, "") != strings.Join(streamEvents, "") {
					t.Errorf("followers' stream = %q; want every event", got)
				}
			case "none read":
				if err != nil || out.Entry == nil || string(out.Entry.Body) != answer || f.IsStreaming() {
					t.Errorf("flight: %+v %v streaming=%v; want the stored entry, not a stream", out, err, f.IsStreaming())
				}
			case "some read":
				if !errors.Is(err, coalesce.ErrLeaderGone) {
					t.Errorf("flight: %+v %v; want ErrLeaderGone", out, err)
				}
			}
		})
	}
}
