// Package cache stores complete upstream answers so that one unique prompt
// costs one upstream call: the positive response cache (and, with kind "n"
// keys, the negative cache) behind one small [Store] interface with two
// implementations.
//
//   - [Memory] is the embedded-mode store: an otter/v2 cache bounded in
//     estimated bytes (not entries, because bodies range from a few hundred
//     bytes to megabytes) with a per-entry TTL.
//   - [Redis] is the distributed-mode store: one GET per lookup, SET with PX
//     per store, UNLINK per delete, and a compact binary value format
//     ([Marshal], [Unmarshal]) so a body is stored as raw bytes, not
//     base64 inside JSON.
//
// Keys are opaque strings built by the keying package, e.g.
// "corral:v1:{acme:<64 hex>}:r". Both stores also delete by a Redis glob
// pattern ([Memory.DeletePattern], [Redis.DeletePattern]) with the same
// matching rules, so an admin purge of "corral:v1:{acme:*" behaves the same
// in both modes.
//
// # Immutability contract
//
// An [Entry] is immutable once it is handed to Set: Set keeps (Memory) or
// encodes (Redis) the Body and Header the caller passed without copying
// them, and the caller must not modify them afterwards. An Entry returned by
// Get must not be modified either: Memory returns the entry it stores, shared
// by every reader. Copying a body on every hit would cost more than the whole
// lookup, and nothing in the gateway needs to modify a stored answer.
//
// # Corruption policy
//
// A Redis value that does not decode (truncated, garbage, or written by a
// future codec version during a rolling upgrade) is a miss: Get returns an
// error for which both errors.Is(err, ErrNotFound) and
// errors.Is(err, ErrCorrupt) report true, so callers that only know about
// misses do the right thing and metrics can still count corruption. Decoding
// never panics (see FuzzUnmarshal). The value is not deleted: a newer
// gateway may be able to read it, and the next leader's Set overwrites it.
//
// # What is not cacheable
//
// Set refuses a nil entry, an empty body and a TTL <= 0 with
// [ErrNotCacheable] instead of skipping them silently, so a caller bug shows
// up in tests; callers treat every Set error as "not stored" and carry on,
// because a cache fault must never fail a user request.
package cache
