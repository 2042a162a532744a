package server

import (
	"runtime"
	"sync"
	"weak"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/wire"
)

// replayShareMin is the smallest body whose replay is shared: a small
// answer renders in microseconds and a stalled client of it holds little,
// so it is rendered per request, off the table.
const replayShareMin = 32 << 10

// replays shares the events of stored answers replayed as streams. A
// replay is a pure function of the entry, the format, the endpoint and
// the request's facts, and renders the whole answer at once (about twice
// its body): rendered per request, each client that stopped reading a
// streamed hit held its own copy for as long as the write stall let it
// (issue 33 point 18: 30 clients of a 4 MiB answer, 241 MiB). Readers of
// one entry with the same facts now write from one rendering.
//
// Its pointers are weak: a rendering lives while a client writes from it
// and its slot is removed once it is collected, so the table holds no
// more slots than renderings in memory and keeps no entry alive. The zero
// value is ready to use.
type replays struct {
	mu sync.Mutex // protects m
	m  map[replayKey]weak.Pointer[replay]
}

// replayKey is what a replay depends on. Formats are stateless
// comparable values (wire.Format).
type replayKey struct {
	e        weak.Pointer[entry.Entry]
	format   wire.Format
	endpoint string
	facts    wire.Facts
}

// replay is one rendering, made once by whichever reader comes first.
type replay struct {
	once   sync.Once
	events [][]byte // read-only, shared by every reader
	err    error
}

// replaySlot names a slot for its clean-up.
type replaySlot struct {
	k  replayKey
	wp weak.Pointer[replay]
}

// get returns e's rendering for c, rendering it when no reader holds one
// (a body under replayShareMin: always). The caller must keep the result
// reachable while it writes its events (runtime.KeepAlive after the last
// write), or a later reader may render another.
func (t *replays) get(c *call, e *entry.Entry) *replay {
	if len(e.Body) < replayShareMin {
		r := &replay{}
		r.events, r.err = c.format.Replay(c.endpoint, e.Body, c.facts)
		return r
	}
	k := replayKey{e: weak.Make(e), format: c.format, endpoint: c.endpoint, facts: c.facts}
	t.mu.Lock()
	r := t.m[k].Value()
	if r == nil {
		if t.m == nil {
			t.m = make(map[replayKey]weak.Pointer[replay])
		}
		r = &replay{}
		wp := weak.Make(r)
		t.m[k] = wp
		runtime.AddCleanup(r, t.forget, replaySlot{k: k, wp: wp})
	}
	t.mu.Unlock()
	r.once.Do(func() { r.events, r.err = c.format.Replay(c.endpoint, e.Body, c.facts) })
	return r
}

// forget removes a collected rendering's slot, unless a later one took it.
func (t *replays) forget(slot replaySlot) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[slot.k] == slot.wp {
		delete(t.m, slot.k)
	}
}
