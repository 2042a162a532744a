package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/corralhq/corral/internal/spend"
)

// TestBypassThatGotNoAnswerCostsNothing: a BYPASS call the upstream
// refused (a 400, a 500 passed through) or that reached no upstream
// answered no prompt and costs nothing, as a leader's failed call does:
// its reservation is released, not charged. Seen as a tenant whose
// no-store calls met upstream errors burning its budget at each call's
// estimate while its usage showed $0.
func TestBypassThatGotNoAnswerCostsNothing(t *testing.T) {
	var calls atomic.Int64
	limits := spend.Limits{Day: 4 * 240_000}
	h := newHarness(t, withPrices, withCapped(limits.Day, &calls), func(o *harnessOptions) {
		next := o.wrapUpstream
		o.wrapUpstream = func(up http.Handler) http.Handler {
			priced := next(up)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				r.Body = io.NopCloser(bytes.NewReader(body))
				switch {
				case bytes.Contains(body, []byte("refuse me")):
					calls.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusBadRequest)
					_, _ = io.WriteString(w, `{"error":{"message":"no","type":"invalid_request_error","param":null,"code":null}}`)
				case bytes.Contains(body, []byte("break me")):
					calls.Add(1)
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusInternalServerError)
					_, _ = io.WriteString(w, `{"error":{"message":"down","type":"server_error","param":null,"code":null}}`)
				default:
					priced.ServeHTTP(w, r)
				}
			})
		}
	})
	ctx := context.Background()
	for _, body := range []string{cappedChat("refuse me"), cappedChat("break me"),
		`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"refuse me"}]}`} {
		a := send(ctx, h.gw.URL, cappedKey, body, "Cache-Control", "no-store")
		if a.status == http.StatusOK || a.header.Get("X-Corral-Cache") != cacheBypass {
			t.Fatalf("%s: %d %s %s; want the upstream's error as a BYPASS", body, a.status, a.header.Get("X-Corral-Cache"), a.body)
		}
		st, err := h.srvs[0].budgets.Read(ctx, "capped", limits)
		if err != nil {
			t.Fatal(err)
		}
		if st[0].Spent != 0 || st[0].Reserved != 0 {
			t.Errorf("after %s (%d): spent %s reserved %s; want nothing charged or held", body, a.status, st[0].Spent, st[0].Reserved)
		}
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("upstream calls = %d; want 3", n)
	}
	// An answered BYPASS is still charged its cost.
	if a := send(ctx, h.gw.URL, cappedKey, cappedChat("answer me"), "Cache-Control", "no-store"); a.status != 200 {
		t.Fatalf("answered BYPASS: %d %s", a.status, a.body)
	}
	st, err := h.srvs[0].budgets.Read(ctx, "capped", limits)
	if err != nil {
		t.Fatal(err)
	}
	if st[0].Spent != 240_000 || st[0].Reserved != 0 {
		t.Errorf("after an answered BYPASS: spent %s reserved %s; want its $0.00024", st[0].Spent, st[0].Reserved)
	}
}
