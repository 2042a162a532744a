package objects

import (
	"context"
	"sync"
)

// Memory is a Store in process memory, for tests and for a server built
// without a persistent store. It refuses new records past its maximum
// rather than forget owners.
type Memory struct {
	max int

	mu     sync.Mutex // protects owners
	owners map[string]Owner
}

var _ Store = (*Memory)(nil)

// NewMemory returns a memory store holding at most max records (0 means
// 1,000,000).
func NewMemory(max int) *Memory {
	if max <= 0 {
		max = 1_000_000
	}
	return &Memory{max: max, owners: make(map[string]Owner)}
}

// Claim implements Store.
func (m *Memory) Claim(_ context.Context, id string, o Owner) (Owner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if prev, ok := m.owners[id]; ok {
		return prev, nil
	}
	if len(m.owners) >= m.max {
		return Owner{}, ErrFull
	}
	m.owners[id] = o
	return o, nil
}

// Get implements Store.
func (m *Memory) Get(_ context.Context, ids []string) ([]*Owner, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]*Owner, len(ids))
	for i, id := range ids {
		if o, ok := m.owners[id]; ok {
			out[i] = &o
		}
	}
	return out, nil
}

// Set implements Store.
func (m *Memory) Set(_ context.Context, id string, o Owner) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.owners[id]; !ok && len(m.owners) >= m.max {
		return ErrFull
	}
	m.owners[id] = o
	return nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.owners, id)
	return nil
}
