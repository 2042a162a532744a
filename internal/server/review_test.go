package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/mockllm"
)

func TestProxyRefusesPathEscapes(t *testing.T) {
	h := newHarness(t)
	for _, p := range []string{"/v1/../admin", "/v1/files/..%2f..%2fadmin", "/v1//files", "/v1/files/%2e%2e/x", "/v1/a/./b"} {
		req, _ := http.NewRequest(http.MethodGet, h.gw.URL+p, nil)
		req.URL.RawPath = "" // send the path as written
		req.URL.Opaque = p
		req.Header.Set("Authorization", "Bearer "+acmeKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 400 && resp.StatusCode != 404 {
			t.Errorf("GET %s = %d; want it refused", p, resp.StatusCode)
		}
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("escaping paths reached the upstream %d times", n)
	}
}

func TestProxyAppliesModelAllowList(t *testing.T) {
	h := newHarness(t)
	resp := post(t, h, "/v1/responses", limitedKey, []byte(`{"model":"o1-pro","input":"x"}`))
	if resp.StatusCode != 403 {
		t.Errorf("proxied body with a forbidden model = %d; want 403", resp.StatusCode)
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0", n)
	}
}

func TestUpstreamRequestIDNeverReplacesCorrals(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("X-Request-Id", "req_upstream_123")
				next.ServeHTTP(w, r)
			})
		}
	})
	for _, body := range []string{chatBody("rid"), `{"model":"gpt-4o-mini","stream":true,"messages":[]}`, `{"model":"mock-500"}`} {
		a := send(context.Background(), h.gw.URL, acmeKey, body, "X-Request-Id", "client-abc")
		if got := a.header.Get("X-Request-Id"); got != "client-abc" {
			t.Errorf("X-Request-Id = %q; want the client's", got)
		}
	}
}

func TestNoCacheCoalescesAcrossInstances(t *testing.T) {
	gate := make(chan struct{})
	refused := make(chan struct{}, 8) // a lock attempt found another leader: a waiter exists
	h, _ := distributed(t, 2, func(o *harnessOptions) {
		o.gate = gate
		o.server = func(so *Options) { so.Locker = refusalSignal{Locker: so.Locker, refused: refused} }
	})
	go func() {
		// The leader's call is held at the upstream until the other
		// instance's request has found the lock taken, so the two overlap.
		_, _ = h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 })
		<-refused
		close(gate)
	}()
	answers := make(chan answer, 2)
	for _, base := range h.bases() {
		go func() {
			answers <- send(context.Background(), base, acmeKey, chatBody("fresh please"), "Cache-Control", "no-cache")
		}()
	}
	got := []string{(<-answers).header.Get("X-Corral-Cache"), (<-answers).header.Get("X-Corral-Cache")}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("two no-cache requests on two instances made %d upstream calls (%v); want 1", n, got)
	}
}

// refusalSignal is a Locker that signals every refused acquisition.
type refusalSignal struct {
	coalesce.Locker
	refused chan<- struct{}
}

func (l refusalSignal) TryAcquire(ctx context.Context, name string, clear ...string) (coalesce.Release, bool, error) {
	rel, ok, err := l.Locker.TryAcquire(ctx, name, clear...)
	l.signal(ok, err)
	return rel, ok, err
}

func (l refusalSignal) TryAcquireOrRead(ctx context.Context, name string, keys []string, clear ...string) (coalesce.Release, bool, []*entry.Entry, error) {
	rel, ok, found, err := l.Locker.TryAcquireOrRead(ctx, name, keys, clear...)
	l.signal(ok, err)
	return rel, ok, found, err
}

func (l refusalSignal) signal(ok bool, err error) {
	if !ok && err == nil {
		select {
		case l.refused <- struct{}{}:
		default:
		}
	}
}

// rejectStreamOptions is an upstream that refuses the stream_options field,
// as some OpenAI-compatible servers do.
func rejectStreamOptions(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("stream_options")) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = w.Write([]byte(`{"error":{"message":"Unrecognized request argument supplied: stream_options","type":"invalid_request_error","param":"stream_options","code":null}}`))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		next.ServeHTTP(w, r)
	})
}

func TestUpstreamRejectingStreamOptions(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.wrapUpstream = rejectStreamOptions })
	stream := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"old server"}]}`
	a := send(context.Background(), h.gw.URL, acmeKey, stream)
	if a.status != 200 || !strings.HasSuffix(a.body, "data: [DONE]\n\n") {
		t.Fatalf("stream through a server without stream_options: %d %q", a.status, a.body)
	}
	// The non-streaming twin is not poisoned by a remembered 400.
	b := send(context.Background(), h.gw.URL, acmeKey, chatBody("old server"))
	if b.status != 200 {
		t.Errorf("non-streaming twin = %d %s", b.status, b.body)
	}
	// Once known, the splice is not tried again.
	send(context.Background(), h.gw.URL, acmeKey, `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"second"}]}`)
	if !h.srv.noSplice.Load() {
		t.Error("the gateway did not remember that the upstream rejects stream_options")
	}
}

func TestNonJSONAnswerIsNotStored(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.wrapUpstream = func(http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/html")
				_, _ = w.Write([]byte("<html>maintenance</html>"))
			})
		}
	})
	for range 2 {
		if a := send(context.Background(), h.gw.URL, acmeKey, chatBody("html")); a.header.Get("X-Corral-Cache") != cacheMiss {
			t.Errorf("X-Corral-Cache = %s; want MISS both times (a non-JSON 200 is not an answer)", a.header.Get("X-Corral-Cache"))
		}
	}
}

func TestRetryAfterABrokenStreamLeadsAnew(t *testing.T) {
	h, rs := distributed(t, 2, slowStream(6, 0))
	body := `{"model":"gpt-4o-mini","stream":true,"mock":{"cut_after":2},"messages":[{"role":"user","content":"retry me"}]}`
	lock := keying.Name("acme", promptHash(t, "acme", body), keying.Lock)
	for i := range 8 {
		// Once the failed attempt has let go of its lock (its broken
		// stream stays in Redis for a while), a retry must lead anew.
		waitFor(t, func() bool { return rs.Client().Exists(context.Background(), lock).Val() == 0 })
		a := send(context.Background(), h.bases()[i%2], acmeKey, body)
		if a.header.Get("X-Corral-Cache") != cacheMiss || !strings.Contains(a.body, "upstream_error") {
			t.Fatalf("retry %d: %s %q; want a fresh MISS (never an earlier attempt's stream)", i, a.header.Get("X-Corral-Cache"), a.body)
		}
	}
	if n := h.mock.Stats().Requests; n != 8 {
		t.Errorf("upstream calls = %d; want 8", n)
	}
}

func TestStreamingBadRequestCostsOneCall(t *testing.T) {
	h := newHarness(t)
	for range 3 {
		if a := send(context.Background(), h.gw.URL, acmeKey, `{"model":"mock-400","stream":true,"messages":[]}`); a.status != 400 {
			t.Fatalf("status %d", a.status)
		}
	}
	if n := h.mock.Stats().Requests; n != 3 {
		t.Errorf("3 streaming requests answered 400 made %d upstream calls; want 3", n)
	}
}

func TestUnreadableEntryDoesNotBlockTheLock(t *testing.T) {
	h, rs := distributed(t, 1, func(o *harnessOptions) {
		o.server = func(so *Options) { so.WaitTimeout, so.FailOnWaitTimeout = time.Minute, true }
	})
	body := chatBody("corrupt entry")
	name := keying.Name("acme", promptHash(t, "acme", body), keying.Response)
	rs.Client().Set(context.Background(), name, "not an entry", time.Minute)
	a := send(context.Background(), h.gw.URL, acmeKey, body)
	if a.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("with an unreadable entry: %d %s; want a MISS that replaces it", a.status, a.header.Get("X-Corral-Cache"))
	}
}
