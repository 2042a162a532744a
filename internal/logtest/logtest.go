// Package logtest holds a log sink for tests: a buffer that the code under
// test may write from many goroutines (a logger shared by a server's
// handlers, a breaker's probe, a limiter's fallback) while the test reads
// what was logged so far.
package logtest

import (
	"bytes"
	"strings"
	"sync"
)

// Buffer is an io.Writer safe for concurrent use. Its zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex // protects b
	b  bytes.Buffer
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Count reports how many times s occurs in what was written so far, as
// strings.Count does.
func (b *Buffer) Count(s string) int {
	return strings.Count(b.String(), s)
}
