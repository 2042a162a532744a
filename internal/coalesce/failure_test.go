package coalesce_test

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/negcache"
)

var (
	errStalled  = errors.New("upstream call timed out")
	failureKey  = keying.Name("acme", hash, keying.Failure)
	negativeKey = negcache.Key("acme", hash)
	renderedErr = `{"error":{"message":"timed out","type":"server_error","param":null,"code":"upstream_timeout"}}`
)

// transientOptions make errStalled transient and render it as the HTTP
// layer would.
func transientOptions(o *coalesce.Options) {
	o.Transient = func(err error) bool { return errors.Is(err, errStalled) }
	o.Render = func(_ *coalesce.Request, err error) *entry.Entry {
		return &entry.Entry{Status: 504, Header: map[string][]string{"Content-Type": {"application/json"}}, Body: []byte(renderedErr)}
	}
	o.FailureTTL = time.Minute
}

// TestWaitersShareTransientFailure: the leader on instance A fails
// transiently; the waiter on instance B answers with A's failure, as A's
// client got it, and calls nobody. The next request, which did not wait,
// is a new attempt.
func TestWaitersShareTransientFailure(t *testing.T) {
	unavailable := func() *coalesce.Response {
		return &coalesce.Response{Status: 503, Header: map[string][]string{"Content-Type": {"application/json"}, "Retry-After": {"2"}},
			Body: io.NopCloser(strings.NewReader(`{"error":{"message":"overloaded"}}`))}
	}
	tests := []struct {
		name       string
		give       func() (*coalesce.Response, error)
		minStored  bool // the waiter checks its entries itself (Cache-Control: max-age)
		wantStatus int
		wantBody   string
		wantHeader string // Retry-After
	}{
		{"error", func() (*coalesce.Response, error) { return nil, errStalled }, false, 504, renderedErr, ""},
		{"error, max-age waiter", func() (*coalesce.Response, error) { return nil, errStalled }, true, 504, renderedErr, ""},
		{"503 passed through", func() (*coalesce.Response, error) { return unavailable(), nil }, false, 503, `{"error":{"message":"overloaded"}}`, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cl := newCluster()
			started, release := make(chan struct{}, 1), make(chan struct{})
			a := newInstance(t, cl, cl, func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
				started <- struct{}{}
				<-release
				return tt.give()
			}, transientOptions)
			b := newInstance(t, cl, cl, nil, transientOptions) // B must not call upstream while it waits
			fa := a.co.Join("acme", hash, request(false))
			defer fa.Leave()
			<-started
			build := request(false)
			if tt.minStored {
				build = func() *coalesce.Request {
					r := request(false)()
					r.MinStoredAt = time.Now().Add(-time.Minute)
					return r
				}
			}
			fb := b.co.Join("acme", hash, build)
			defer fb.Leave()
			<-cl.watched // B waits for A
			close(release)
			_, _ = result(t, fa)
			out, err := result(t, fb)
			if err != nil || out.Entry == nil || fb.Source(out) != coalesce.Coalesced {
				t.Fatalf("B: %+v, %v; want A's failure, COALESCED", out, err)
			}
			if out.Entry.Status != tt.wantStatus || string(out.Entry.Body) != tt.wantBody || out.Stored {
				t.Errorf("B's answer: %d %s (stored %v); want %d %s, not stored", out.Entry.Status, out.Entry.Body, out.Stored, tt.wantStatus, tt.wantBody)
			}
			if got := strings.Join(out.Entry.Header["Retry-After"], ","); got != tt.wantHeader {
				t.Errorf("B's Retry-After = %q; want %q", got, tt.wantHeader)
			}
			if b.up.count() != 0 || a.up.count() != 1 || b.obs.tookOver() != 0 {
				t.Errorf("calls A %d, B %d, takeovers %d; want 1, 0, 0", a.up.count(), b.up.count(), b.obs.tookOver())
			}
			if cl.entry(responseKey) != nil || cl.entry(negativeKey) != nil {
				t.Error("a transient failure was stored as an answer")
			}

			// A new request is a new attempt: it takes the lock, which
			// deletes the failure, and calls upstream.
			b.up.call = func(context.Context, *coalesce.Request) (*coalesce.Response, error) {
				if cl.entry(failureKey) != nil {
					t.Error("the failure outlived the next leader's lock")
				}
				return jsonAnswer(answer), nil
			}
			again := b.co.Join("acme", hash, request(false))
			defer again.Leave()
			if out, err := result(t, again); err != nil || out.Source != coalesce.Miss || b.up.count() != 1 {
				t.Errorf("the next request: %+v, %v after %d calls on B; want a MISS of its own", out, err, b.up.count())
			}
		})
	}
}
