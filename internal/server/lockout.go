package server

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/lockout"
)

// lockedOut counts an attempt at the admin token (wrong or right) from
// the request's TCP peer and, when that address is locked out for
// guessing, answers 429 and reports true. A request without a token is
// no attempt: it is neither counted nor refused here.
func (s *Server) lockedOut(w http.ResponseWriter, r *http.Request, wrong bool) bool {
	client := lockout.Client(r.RemoteAddr)
	v := s.lockout.Attempt(r.Context(), client, wrong)
	if v.Locked {
		s.log.Warn("admin token: address locked out after repeated wrong tokens",
			slog.String("client", client), slog.String("path", r.URL.Path))
	}
	if !v.Refused {
		return false
	}
	writeError(w, errTooManyAttempts(v.RetryAfter))
	return true
}

// errTooManyAttempts answers an admin-token attempt from an address
// locked out for guessing, for d more.
func errTooManyAttempts(d time.Duration) *apiError {
	e := clientError(http.StatusTooManyRequests, "too_many_attempts",
		"Too many wrong admin tokens from this address: every attempt from it is refused, the right token included, until the time Retry-After gives.")
	e.retryAfter = d
	return e
}
