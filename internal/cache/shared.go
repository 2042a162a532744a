package cache

import (
	"bytes"
	"maps"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// shareMin is the smallest body UnmarshalShared shares: below it a copy
// per reader costs less than the table's bookkeeping, and a stalled
// client's small answer holds little.
const shareMin = 32 << 10

// decoded is the process's table of large entries decoded from Redis
// that some reader still holds. Every Redis hit reads its own bytes, so
// without it each client of a large answer held its own copy for as
// long as it took to write (clients that never read: up to the write
// stall, issue 33 point 18). It is one table for the process because it
// can only ever hand out an entry equal, field by field and byte by
// byte, to the one just decoded: stores on different Redis servers
// whose keys collide share nothing they should not.
var decoded = sharedEntries{m: make(map[string]weak.Pointer[Entry])}

// sharedEntries maps a key to the last large entry decoded from it. The
// pointers are weak, so the table keeps nothing alive: a slot is removed
// once its entry is collected, and the table holds no more slots than
// there are such entries in memory.
type sharedEntries struct {
	mu sync.Mutex // protects m
	m  map[string]weak.Pointer[Entry]
}

// sharedSlot names a slot for its clean-up.
type sharedSlot struct {
	key string
	wp  weak.Pointer[Entry]
}

// UnmarshalShared is Unmarshal of data, the value read from Redis under
// key. When another reader in this process still holds an entry decoded
// from the same value (equal in every field), that entry is returned and
// data is left to the garbage collector: readers of one large answer
// share one copy of it. The entry must not be modified, like the entries
// the memory store returns.
//
// An entry is shared while it is reachable, and a reader may hold its
// Body without it: one that writes the body to a slow client keeps the
// entry reachable until the write returns (runtime.KeepAlive), or the
// next reader decodes a copy of its own.
func UnmarshalShared(key string, data []byte) (*Entry, error) {
	e, err := Unmarshal(data)
	if err != nil || len(e.Body) < shareMin {
		return e, err
	}
	return decoded.share(key, e), nil
}

// share returns the held entry of key when it equals e, else records e
// as key's entry and returns it.
func (s *sharedEntries) share(key string, e *Entry) *Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	if held := s.m[key].Value(); held != nil && sameEntry(held, e) {
		return held
	}
	wp := weak.Make(e)
	s.m[key] = wp
	runtime.AddCleanup(e, s.forget, sharedSlot{key: key, wp: wp})
	return e
}

// forget removes a collected entry's slot, unless a later entry took it.
func (s *sharedEntries) forget(slot sharedSlot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m[slot.key] == slot.wp {
		delete(s.m, slot.key)
	}
}

// sameEntry reports whether a and b hold the same answer in every field.
func sameEntry(a, b *Entry) bool {
	return a.Status == b.Status && a.StoredAt.Equal(b.StoredAt) && a.TTL == b.TTL &&
		a.PromptTokens == b.PromptTokens && a.CompletionTokens == b.CompletionTokens &&
		a.CachedTokens == b.CachedTokens && a.CacheWriteTokens == b.CacheWriteTokens &&
		a.Model == b.Model && a.UsageUnread == b.UsageUnread && maps.EqualFunc(a.Header, b.Header, slices.Equal) &&
		bytes.Equal(a.Body, b.Body)
}
