// Package ratelimit limits each tenant's requests per minute and tokens per
// minute, in process memory (embedded mode) or in Redis (distributed mode),
// with the same semantics in both.
//
// # Model: GCRA
//
// Both implementations run the generic cell rate algorithm (GCRA), the
// token bucket expressed as one timestamp per key: the theoretical arrival
// time (TAT), the moment at which the key's bucket would be full again. A
// Limit of Rate units per Period with burst Burst gives an emission interval
// T = Period/Rate and lets the TAT run at most Burst×T ahead of now. Taking
// n units moves the TAT n×T forward; it fits when the new TAT is at most
// Burst×T ahead. So PerMinute(30) lets a tenant fire 30 requests at once and
// then one every 2 s, and after 60 s of silence it may burst 30 again.
//
// Why not the alternatives:
//
//   - A fixed window (INCR a counter per minute) lets twice the limit through
//     across a boundary: 30 requests at 12:00:59 and 30 more at 12:01:00 are
//     60 within two seconds, and the counter tells a rejected client only
//     "wait for the next window", not when one unit frees up.
//   - A sliding log (a sorted set of request times) is exact but costs memory
//     and work per request: a 200 000 tokens/min tenant would need a log entry
//     per token, or per request with a weight, trimmed on every call.
//   - A sliding window counter approximates the log with two counters, but is
//     still an approximation at the edges.
//
// GCRA stores one number per key, refills smoothly (one unit every T, not
// everything at a window edge), answers "retry after" and "reset after"
// exactly, and needs a single read-modify-write, which in Redis is one Lua
// script and one round trip (gcra.lua). Both implementations share the
// arithmetic (gcra.go): all times are whole nanoseconds, the cost of n units
// is floor(n×Period/Rate) and the burst tolerance floor(Burst×Period/Rate),
// so a limit such as 7/min still admits exactly 7 at once and the two
// implementations give the same answers for the same clock readings.
//
// # Debt
//
// AllowN takes units only when they fit. ChargeN takes them unconditionally
// and may push the TAT beyond the burst tolerance: the key is then in debt
// and later AllowN calls are refused until the debt is paid back at Rate.
// The server uses it after an upstream call whose real token usage exceeded
// the estimate it admitted (the wire format's estimate, e.g. openai.EstimateTokens). Debt is capped at 30 days.
//
// # Clock
//
// The memory limiter reads an injected clock (time.Now by default, through
// its monotonic reading). The Redis script reads Redis TIME, so every
// gateway instance shares the server's clock and skew between instances
// cannot hand out extra units.
//
// # Redis faults: fail open, on purpose
//
// Fallback wraps the Redis limiter: when Redis errors it answers from a local
// memory limiter instead, skips Redis for a short backoff, probes it again
// and returns to it when it answers. It never returns an error because of
// Redis. A rate limiter here protects the upstream budget and shares it
// fairly; it is not an authentication boundary. Failing closed would turn a
// Redis outage into a total outage of the gateway, which the design forbids
// ("a Redis fault never turns into a failed user request"). The price is
// that during an outage each instance enforces the full limit on its own, so
// N instances admit up to N times the limit until Redis is back.
package ratelimit
