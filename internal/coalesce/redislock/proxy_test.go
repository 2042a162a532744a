package redislock

import (
	"net"
	"sync"
	"testing"
)

// freezeProxy forwards TCP connections to a target; while frozen it holds
// every byte in both directions without closing anything, like a network
// partition that leaves connections half-open.
type freezeProxy struct {
	addr   string
	target string
	ln     net.Listener
	wg     sync.WaitGroup

	mu     sync.Mutex // protects frozen, conns and closed; cond waits on it
	cond   *sync.Cond // signalled when frozen or closed change
	frozen bool
	conns  []net.Conn
	closed bool
}

func newFreezeProxy(tb testing.TB, target string) *freezeProxy {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	p := &freezeProxy{addr: ln.Addr().String(), target: target, ln: ln}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	tb.Cleanup(p.close)
	return p
}

func (p *freezeProxy) freeze(on bool) {
	p.mu.Lock()
	p.frozen = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *freezeProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, up)
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(up, c) })
		p.wg.Go(func() { p.pipe(c, up) })
	}
}

func (p *freezeProxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen && !p.closed {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or closed: closing both ends passes it on
		}
	}
}

func (p *freezeProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
	p.wg.Wait()
}
