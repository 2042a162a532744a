// Package redislock is the cross-instance half of coalescing: a leader lock
// in Redis, so one gateway instance of many calls upstream for a prompt, and
// a "done" bus, so waiters on the other instances wake the moment the
// leader has stored the answer.
//
// # Locker and Lease
//
// [Locker.TryAcquire] runs SET name token NX PX ttl with a fresh random
// token. The token is what makes the lock safe: [Lease.Release] deletes the
// key with a compare-and-delete Lua script (release.lua), so a slow leader
// whose lock already expired and was taken by a successor never deletes the
// successor's lock. A plain DEL would, and the next wave of requests would
// stampede upstream while the successor is still working.
//
// A held [Lease] renews itself every TTL/3 with compare-and-pexpire
// (renew.lua) in one goroutine it owns until Release. Renewal is what lets
// the TTL be short (10 s by default) although upstream calls may last
// minutes: a live leader keeps its lock, and a dead leader (crashed,
// partitioned) stops renewing, so its lock expires within one TTL and a
// waiter takes over. A renewal that fails with a Redis error is retried at
// the next tick; the lease is declared lost ([Lease.Lost]) only when a
// renewal finds the key gone or someone else's, or when a whole TTL has
// passed since the last successful renewal, by which time the key has
// expired in Redis too.
//
// The token may carry the holder's span after a ';' (the W3C traceparent
// of the leader's flight span, only when it is sampled), so a waiter on
// another instance links its trace to the leader's ([SpanOf]).
//
// Lock names are opaque full keys such as "corral:v1:{acme:<hash>}:l"; the
// hash tag keeps each lock in its prompt's Cluster slot.
//
// # Bus
//
// A [Bus] carries "done" notifications (the payload is just the name) on one
// pub/sub channel. A process holds one Bus with exactly one subscription and
// fans each message out to its local watchers ([Bus.Watch]), so a thousand
// waiters cost one Redis connection, not a thousand. A message nobody
// watches is dropped. After a connection loss the Bus resubscribes with
// backoff; messages published meanwhile are lost, as pub/sub gives no
// delivery guarantee, which is why waiters also poll as a safety net.
//
// # Redis faults
//
// Every command has its own timeout (Options.OpTimeout, BusOptions.OpTimeout)
// and errors are returned, never hidden, so the caller can degrade to
// in-process coalescing. go-redis applies context deadlines to socket reads
// and writes only when the client is built with ContextTimeoutEnabled: true;
// without it a hung (not down) server holds a command for the client's
// ReadTimeout instead. Build the client with it, or keep ReadTimeout and
// WriteTimeout near OpTimeout.
package redislock
