package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/telemetry"
	"github.com/corralhq/corral/internal/tenant"
)

// limitRequests enforces the tenant's requests/min on every authenticated
// request, cache hits included, and writes OpenAI's request headers. A
// tenant without a limit costs nothing, not even a Redis round trip.
func (s *Server) limitRequests(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.admitRequest(w, r) {
			next.ServeHTTP(w, r)
		}
	})
}

// admitRequest takes one request from the tenant's requests/min, sets the
// headers and answers a refusal; false means refused. It is apart from
// limitRequests because that frame stays under every open stream (see
// handleModelCall).
//
//go:noinline
func (s *Server) admitRequest(w http.ResponseWriter, r *http.Request) bool {
	t, _ := tenant.FromContext(r.Context())
	if t.RequestsPerMinute <= 0 {
		return true
	}
	res, aerr := s.takeTokens(r.Context(), t, ratelimit.Requests, t.RequestsPerMinute, 1)
	ratelimit.SetHeaders(w.Header(), ratelimit.Requests.Suffix(), res)
	if aerr != nil {
		writeError(w, aerr)
		return false
	}
	return true
}

// takeTokens takes n units of the tenant's kind limit. It returns the
// result for headers and, when refused, the 429 to send. A limiter error
// lets the request through: limits fail open on purpose (the limiter
// already falls back to local limits when Redis is away).
func (s *Server) takeTokens(ctx context.Context, t *tenant.Tenant, kind ratelimit.Kind, perMinute, n int) (ratelimit.Result, *apiError) {
	key, err := ratelimit.Key(t.ID, kind)
	if err != nil {
		return ratelimit.Result{}, nil
	}
	limit := ratelimit.PerMinute(perMinute)
	ctx, span := s.span(ctx, telemetry.SpanRateLimit)
	res, err := s.limiter.AllowN(ctx, key, limit, n)
	if span.IsRecording() {
		span.SetAttributes(telemetry.RateLimitKind.String(kind.Suffix()), telemetry.RateLimitAllowed.Bool(err != nil || res.Allowed),
			telemetry.RateLimitRemaining.Int(res.Remaining))
		span.End()
	}
	switch {
	case errors.Is(err, ratelimit.ErrExceedsBurst):
		s.metrics.RateLimited(t.ID, kind.Suffix())
		return res, &apiError{Status: http.StatusTooManyRequests, Type: kind.Suffix(), Code: "rate_limit_exceeded", neverFits: true,
			Message: fmt.Sprintf("Request too large for %s per minute: limit %d, requested %d. It can never fit this limit, so retrying will not help; send a smaller request (fewer max_tokens or a shorter prompt).",
				kind.Suffix(), perMinute, n)}
	case err != nil:
		return res, nil
	case !res.Allowed:
		s.metrics.RateLimited(t.ID, kind.Suffix())
		return res, &apiError{Status: http.StatusTooManyRequests, Type: kind.Suffix(), Code: "rate_limit_exceeded",
			retryAfter: res.RetryAfter,
			Message: fmt.Sprintf("Rate limit reached for %s per minute: limit %d, remaining %d, requested %d. Please try again in %s.",
				kind.Suffix(), perMinute, res.Remaining, n, res.RetryAfter.Round(time.Millisecond))}
	}
	return res, nil
}

// tenantTokens is a leader's tokens/min budget for its flight: it takes
// the estimate before the call and charges real usage after it. The
// decision it keeps is read by the leader's handler for its headers, once
// the flight is streaming or done.
type tenantTokens struct {
	s        *Server
	t        *tenant.Tenant
	estimate int
	// canTake reports whether an upstream can take the call now; when none
	// can, the flight ends in 503 upstream_unavailable, which costs the
	// tenant nothing, so nothing is taken.
	canTake func() bool

	taken   bool // set by the flight before it streams or ends
	skipped bool // nothing was taken: no upstream could take the call
	res     ratelimit.Result
}

// Take implements coalesce.Tokens.
func (tt *tenantTokens) Take(ctx context.Context) error {
	if tt.canTake != nil && !tt.canTake() {
		tt.skipped = true
		return nil
	}
	res, aerr := tt.s.takeTokens(ctx, tt.t, ratelimit.Tokens, tt.t.TokensPerMinute, tt.estimate)
	tt.taken, tt.res = true, res
	if aerr != nil {
		return aerr
	}
	return nil
}

// Charge implements coalesce.Tokens. A call that found an upstream after
// all, though none could take it when the estimate would have been taken,
// is charged its whole usage.
func (tt *tenantTokens) Charge(ctx context.Context, actual int) {
	if tt.skipped {
		tt.s.chargeActual(ctx, tt.t, 0, actual)
		return
	}
	tt.s.chargeActual(ctx, tt.t, tt.estimate, actual)
}

// chargeActual charges what real usage exceeded the estimate by; a
// request that used less is not refunded, as with OpenAI.
func (s *Server) chargeActual(ctx context.Context, t *tenant.Tenant, estimate, actual int) {
	if t.TokensPerMinute <= 0 || actual <= estimate {
		return
	}
	key, err := ratelimit.Key(t.ID, ratelimit.Tokens)
	if err != nil {
		return
	}
	_, _ = s.limiter.ChargeN(ctx, key, ratelimit.PerMinute(t.TokensPerMinute), actual-estimate)
}

// tokenHeaders writes the tenant's token headers from the bucket's current
// state without taking anything (hits and followers cost no tokens).
func (s *Server) tokenHeaders(ctx context.Context, t *tenant.Tenant, h http.Header) {
	if t.TokensPerMinute <= 0 {
		return
	}
	res, _ := s.takeTokens(ctx, t, ratelimit.Tokens, t.TokensPerMinute, 0)
	ratelimit.SetHeaders(h, ratelimit.Tokens.Suffix(), res)
}
