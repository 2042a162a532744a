package vertex

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"
)

// fakeSource hands out numbered tokens that live life, or err.
type fakeSource struct {
	mu    sync.Mutex // guards n, err
	n     int
	err   error
	now   func() time.Time
	life  time.Duration
	gate  chan struct{} // when set, each fetch waits for it
	calls chan struct{} // when set, each fetch says so first
}

func (f *fakeSource) Token() (*oauth2.Token, error) {
	if f.calls != nil {
		f.calls <- struct{}{}
	}
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	f.n++
	return &oauth2.Token{AccessToken: "t" + strconv.Itoa(f.n), Expiry: f.now().Add(f.life)}, nil
}

// clock is a test's time, moved on by hand.
type clock struct {
	mu sync.Mutex // guards t
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// TestTokenRenewal: a token is reused until a quarter of its life (at most
// 10s) is left, then replaced; a failed refresh keeps a token that still
// holds, and fails once it has expired.
func TestTokenRenewal(t *testing.T) {
	tests := []struct {
		name  string
		life  time.Duration
		reuse time.Duration // a call this long after the fetch gets the same token
		renew time.Duration // one this long after gets the next
	}{
		{"an hour-long token", time.Hour, time.Hour - 11*time.Second, time.Hour - 10*time.Second},
		{"a two-second token", 2 * time.Second, 1499 * time.Millisecond, 1500 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := &clock{t: time.Unix(1_700_000_000, 0)}
			src := &fakeSource{now: clk.now, life: tt.life}
			c := newTokenCache(func() (oauth2.TokenSource, error) { return src, nil }, clk.now)
			tok := func() string {
				t.Helper()
				got, err := c.Token()
				if err != nil {
					t.Fatal(err)
				}
				return got.AccessToken
			}
			start := clk.now()
			if got := tok(); got != "t1" {
				t.Fatalf("first token %s", got)
			}
			clk.add(tt.reuse)
			if got := tok(); got != "t1" {
				t.Errorf("at %v: %s; want t1 reused", tt.reuse, got)
			}
			clk.t = start.Add(tt.renew)
			if got := tok(); got != "t2" {
				t.Errorf("at %v: %s; want t2", tt.renew, got)
			}
			src.mu.Lock()
			src.err = errors.New("token endpoint down")
			src.mu.Unlock()
			clk.add(tt.renew)
			if got := tok(); got != "t2" {
				t.Errorf("refresh failed while t2 holds: %s; want t2 kept", got)
			}
			clk.add(tt.life)
			if _, err := c.Token(); err == nil {
				t.Errorf("refresh failed after t2 expired: no error")
			}
		})
	}
}

// TestTokenOneFetch: callers that find the token due while another
// fetches it wait for that one fetch; a waiter whose context ends leaves.
func TestTokenOneFetch(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	src := &fakeSource{now: clk.now, life: time.Hour, gate: make(chan struct{}), calls: make(chan struct{}, 1)}
	c := newTokenCache(func() (oauth2.TokenSource, error) { return src, nil }, clk.now)
	const n = 10
	got := make(chan string, n)
	var wg sync.WaitGroup
	wg.Go(func() {
		if tok, err := c.Token(); err == nil {
			got <- tok.AccessToken
		}
	})
	<-src.calls // the first caller is fetching, the lock held
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.token(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("a waiter whose context ended: %v; want context.Canceled", err)
	}
	for range n - 1 {
		wg.Go(func() {
			tok, err := c.Token()
			if err == nil {
				got <- tok.AccessToken
			}
		})
	}
	close(src.gate)
	wg.Wait()
	close(got)
	count := 0
	for tok := range got {
		count++
		if tok != "t1" {
			t.Errorf("token %s; want t1 for every caller", tok)
		}
	}
	if count != n || src.n != 1 {
		t.Errorf("%d tokens from %d fetches; want %d from 1", count, src.n, n)
	}
}

// TestTokenRetryAfterFailedRenewal: once a renewal failed while the token
// still holds, the calls in the next retryAfter use it without a fetch of
// their own; the one after that tries again, and takes the new token.
func TestTokenRetryAfterFailedRenewal(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	src := &fakeSource{now: clk.now, life: time.Hour, calls: make(chan struct{}, 100)}
	c := newTokenCache(func() (oauth2.TokenSource, error) { return src, nil }, clk.now)
	if _, err := c.Token(); err != nil {
		t.Fatal(err)
	}
	clk.add(time.Hour - 5*time.Second) // due for renewal, 5 s left
	src.mu.Lock()
	src.err = errors.New("token endpoint down")
	src.mu.Unlock()
	for range 10 {
		if got, err := c.Token(); err != nil || got.AccessToken != "t1" {
			t.Fatalf("while renewal fails: %v %v; want t1", got, err)
		}
	}
	if n := len(src.calls); n != 2 {
		t.Errorf("%d fetches for 11 calls; want the first and one failed renewal", n)
	}
	src.mu.Lock()
	src.err = nil
	src.mu.Unlock()
	clk.add(retryAfter)
	if got, err := c.Token(); err != nil || got.AccessToken != "t2" || len(src.calls) != 3 {
		t.Errorf("after retryAfter: %v %v, %d fetches; want t2 from a third fetch", got, err, len(src.calls))
	}
}
