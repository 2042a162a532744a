// Package coalesce is Corral's flight layer: it makes one unique prompt
// cost one upstream call, on one instance or on many sharing Redis.
//
// A request that missed the cache joins its prompt's flight (one per
// tenant and prompt hash, through the stdlib-only leaf coalesce/flight).
// The flight's work is the cross-instance protocol:
//
//  1. lead: take the prompt's lock, or, when another instance holds it,
//     wait for its "done" notice (with a poll as a safety net), follow its
//     live stream (mirror), and take the lock over when the leader left
//     without an answer;
//  2. double-check the cache (another flight may have just stored it);
//  3. admit: the tenant's tokens/min and leader semaphore;
//  4. call upstream once, relay a stream into the flight's record (and, for
//     other instances, into the live stream), classify the answer (the
//     negative cache's table), store it, publish "done", release the lock.
//
// groupcache's root package is the model: it combines its singleflight
// leaf, the cache and the peers in load(), and load returns its result. So
// here: the work returns (Outcome, error), with typed errors the HTTP layer
// turns into statuses in one place, and nothing is written into shared
// state from inside a callee. The one exception is documented on Flight:
// a streamed answer's outcome travels with its record's clean end, so a
// follower that saw the whole stream has it without waiting for the lock
// to be released.
//
// The package imports neither net/http nor a Redis client. It consumes
// small interfaces it defines (Store, Locker, Bus, Streams, Caller,
// Observer, Health); internal/coalesce/redisflight adapts Redis to them and
// cmd/gateway wires it. Embedded mode is the same code with no Locker, Bus
// or Streams.
package coalesce
