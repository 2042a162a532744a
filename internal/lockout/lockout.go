// Package lockout throttles guesses of the admin token per client
// address: after Rule.Failures wrong tokens within Rule.Window (5 in a
// minute), every attempt from that address is refused for Rule.Lock (a
// minute), the right token included, so a guesser learns nothing from
// its 6th try on. The console's sign-in, /admin/* and /metrics share one
// Throttle, so their wrong tokens add up.
//
// The address is the TCP peer (r.RemoteAddr), never X-Forwarded-For or
// any header a client writes: a header would let each guess claim a new
// address. An IPv6 peer counts by its /64, which one host commonly holds
// whole (Client). Behind a proxy every client shares the proxy's address,
// and a guesser then locks everyone out of the token for a minute: the
// price of never trusting a header, and the same for the right token as
// for the guesser.
//
// Across instances the count lives in Redis (Redis: one Lua script per
// attempt, on Redis's clock, keys under KeyPrefix with a TTL). Fallback
// answers from it while it answers and from a Memory while it does not:
// fail-open to each instance's own count, never to "no throttle" and
// never to "nobody signs in" (an outage must not lock the operators out
// of the admin API they need to repair things). During an outage each
// instance counts alone, so N instances allow up to N×5 guesses a
// minute. Embedded mode uses a Memory alone.
//
// A right token resets nothing: not its own address's count (a guesser
// behind the same NAT as the operator would otherwise get 4 more guesses
// after each of the operator's sign-ins) and nobody else's.
package lockout

import (
	"context"
	"net"
	"net/netip"
	"time"
)

// Rule is when an address is locked out, and for how long.
type Rule struct {
	// Failures wrong tokens within Window lock the address out; the
	// attempt that makes the count is still answered as wrong (401), the
	// next one is refused.
	Failures int
	// Window is how far back wrong tokens count (a sliding window).
	Window time.Duration
	// Lock is how long every attempt from the address is refused.
	Lock time.Duration
}

// DefaultRule is the design's: 5 wrong in a minute, then refused for a
// minute.
var DefaultRule = Rule{Failures: 5, Window: time.Minute, Lock: time.Minute}

func (r Rule) orDefault() Rule {
	if r.Failures <= 0 || r.Window <= 0 || r.Lock <= 0 {
		return DefaultRule
	}
	return r
}

// Verdict is the answer to one attempt.
type Verdict struct {
	// Refused: the address is locked out; the attempt is refused (429)
	// whatever its token, and was not counted.
	Refused bool
	// RetryAfter is, when Refused, how long the lock still lasts.
	RetryAfter time.Duration
	// Locked: this wrong token was the one that locked the address out
	// (for one log line per lock, not one per refused attempt).
	Locked bool
}

// Throttle decides attempts at the admin token. Implementations never
// fail: Memory cannot, and Fallback answers from its local count when
// Redis does not answer.
type Throttle interface {
	// Attempt counts one attempt from client (see Client) whose token
	// was wrong or right, and says whether to refuse it. A right token
	// is counted as nothing; it is only checked against the lock.
	Attempt(ctx context.Context, client string, wrong bool) Verdict
}

// Client is the address remoteAddr (an http.Request's RemoteAddr,
// "host:port") is counted under: an IPv4 address as itself (an
// IPv4-mapped IPv6 one too), an IPv6 address as its /64
// ("2001:db8:1:2::/64"). Anything else (a Unix socket's peer) is counted
// under its host as given.
func Client(remoteAddr string) string {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		host = remoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return host
	}
	a = a.Unmap().WithZone("")
	if a.Is4() {
		return a.String()
	}
	p, _ := a.Prefix(64) // never fails for an IPv6 address and 64 bits
	return p.String()
}
