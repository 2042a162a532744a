package redislock

// Watch registers interest in the done notification for name. The returned
// channel is closed when one arrives; cancel unregisters and must be called
// (deferred) whether or not the channel fired. Every watcher of a name is
// woken by one notification, and a fired watcher is unregistered at once,
// so the registry holds only live waiters.
//
// Watch before checking what you wait for (the cache entry, the lock):
// a notification that arrives between the check and the Watch is missed.
func (b *Bus) Watch(name string) (ch <-chan struct{}, cancel func()) {
	c := make(chan struct{})
	b.watchMu.Lock()
	set := b.watch[name]
	if set == nil {
		set = make(map[chan struct{}]struct{})
		b.watch[name] = set
	}
	set[c] = struct{}{}
	b.watchMu.Unlock()
	return c, func() { b.unwatch(name, c) }
}

func (b *Bus) unwatch(name string, c chan struct{}) {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	set := b.watch[name]
	delete(set, c) // no-op once fired: fire removed the whole set
	if len(set) == 0 {
		delete(b.watch, name)
	}
}

// fire wakes every watcher of name and forgets them. A name nobody watches
// costs one map lookup.
func (b *Bus) fire(name string) {
	b.watchMu.Lock()
	set := b.watch[name]
	delete(b.watch, name)
	b.watchMu.Unlock()
	// Only fire closes, and each set is fired at most once because it
	// left the map above.
	for c := range set {
		close(c)
	}
}

// watchers counts registered watchers, for tests.
func (b *Bus) watchers() int {
	b.watchMu.Lock()
	defer b.watchMu.Unlock()
	n := 0
	for _, set := range b.watch {
		n += len(set)
	}
	return n
}
