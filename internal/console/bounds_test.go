package console

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gatedBackend is fakeBackend with many tenants whose usage reads wait
// for a gate (or their context), counting how many run at once.
type gatedBackend struct {
	*fakeBackend
	n       int
	gate    chan struct{}
	running atomic.Int64
	peak    atomic.Int64
	calls   atomic.Int64
}

func (g *gatedBackend) Tenants(context.Context) []Tenant {
	ts := make([]Tenant, g.n)
	for i := range ts {
		ts[i] = Tenant{ID: fmt.Sprintf("t%03d", i), Source: "api"}
	}
	return ts
}

func (g *gatedBackend) Usage(ctx context.Context, _ string) (Usage, error) {
	g.calls.Add(1)
	n := g.running.Add(1)
	defer g.running.Add(-1)
	for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
	}
	select {
	case <-g.gate:
		return Usage{Requests: 1}, nil
	case <-ctx.Done():
		return Usage{}, ctx.Err()
	}
}

func newGatedConsole(t *testing.T, g *gatedBackend, wait time.Duration) (*httptest.Server, string) {
	t.Helper()
	c, err := New(Options{Backend: g, AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	c.usageWait = wait
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	_, ck := signIn(t, srv.URL, "tok")
	return srv, ck
}

// TestUsageReadsBoundedAcrossPages: several Overview and Tenants loads at
// once, over many tenants, never have more than usageReads usage reads
// running together: open tabs cannot multiply the load on Redis.
func TestUsageReadsBoundedAcrossPages(t *testing.T) {
	g := &gatedBackend{fakeBackend: &fakeBackend{}, n: 100, gate: make(chan struct{})}
	srv, ck := newGatedConsole(t, g, time.Minute)
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i, p := range []string{"/console/", "/console/live", "/console/tenants", "/console/live"} {
		wg.Go(func() { codes[i], _, _ = get(t, srv.URL, p, ck) })
	}
	// Wait until the reads fill every slot, then watch a while for any
	// read beyond them (4 pages could start 4×usageReads), then let every
	// read finish.
	waitFor(t, 10*time.Second, func() bool { return g.running.Load() >= usageReads })
	over := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(over) && g.running.Load() <= usageReads {
		time.Sleep(time.Millisecond)
	}
	close(g.gate)
	wg.Wait()
	if p := g.peak.Load(); p > usageReads {
		t.Errorf("%d usage reads ran at once over 4 pages; want at most %d", p, usageReads)
	}
	if c := g.calls.Load(); c != 4*100 {
		t.Errorf("%d usage reads; want 400 (4 pages × 100 tenants)", c)
	}
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("page %d: %d", i, c)
		}
	}
}

// TestUsageWaitBounded: when the usage reads do not answer (Redis away),
// the Overview answers within its bound, naming the tenants it could not
// read, instead of waiting on each of them in turn.
func TestUsageWaitBounded(t *testing.T) {
	g := &gatedBackend{fakeBackend: &fakeBackend{}, n: 100, gate: make(chan struct{})}
	defer close(g.gate)
	srv, ck := newGatedConsole(t, g, 200*time.Millisecond)
	type answer struct {
		code int
		body string
	}
	done := make(chan answer, 1)
	go func() {
		code, _, body := get(t, srv.URL, "/console/", ck)
		done <- answer{code, body}
	}()
	var a answer
	select {
	case a = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the Overview did not answer in 5s with usage reads hanging; want about 200ms")
	}
	code, body := a.code, a.body
	if code != http.StatusOK || !strings.Contains(body, "Unavailable now: t000, t001") || !strings.Contains(body, "t099") {
		t.Errorf("Overview: %d; want 200 naming every tenant as unavailable", code)
	}
	if c := g.calls.Load(); c > usageReads {
		t.Errorf("%d reads started after the page's wait ended; want at most %d", c, usageReads)
	}
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(d); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatal("condition not met in time")
		}
	}
}

// TestTenantPageReadsOwnDays: a tenant's page reads that tenant's days,
// not every tenant's (30 Redis hashes per tenant in distributed mode).
func TestTenantPageReadsOwnDays(t *testing.T) {
	srv, fb := newTestConsole(t)
	_, ck := signIn(t, srv.URL, "tok")
	if code, _, _ := get(t, srv.URL, "/console/tenants/acme", ck); code != http.StatusOK {
		t.Fatalf("tenant page: %d", code)
	}
	if n := fb.allDays.Load(); n != 0 {
		t.Errorf("the tenant page read every tenant's days %d times; want 0", n)
	}
}

// daysGated is fakeBackend whose every-tenant days read waits for a
// gate, counting how many run at once.
type daysGated struct {
	*fakeBackend
	gate    chan struct{}
	running atomic.Int64
	peak    atomic.Int64
}

func (d *daysGated) UsageDays(ctx context.Context, _, _ time.Time) ([]DayRow, error) {
	n := d.running.Add(1)
	defer d.running.Add(-1)
	for p := d.peak.Load(); n > p && !d.peak.CompareAndSwap(p, n); p = d.peak.Load() {
	}
	select {
	case <-d.gate:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// TestDaysReadShared: Overviews refreshing at once in several tabs make
// one read of every tenant's days at a time, not one each.
func TestDaysReadShared(t *testing.T) {
	d := &daysGated{fakeBackend: &fakeBackend{tenants: []Tenant{{ID: "acme", Source: "api"}}}, gate: make(chan struct{})}
	c, err := New(Options{Backend: d, AdminToken: "tok"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c)
	t.Cleanup(srv.Close)
	_, ck := signIn(t, srv.URL, "tok")
	var wg sync.WaitGroup
	codes := make([]int, 4)
	for i := range codes {
		wg.Go(func() { codes[i], _, _ = get(t, srv.URL, "/console/live", ck) })
	}
	waitFor(t, 10*time.Second, func() bool { return d.running.Load() >= 1 })
	over := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(over) && d.running.Load() <= 1 {
		time.Sleep(time.Millisecond)
	}
	close(d.gate)
	wg.Wait()
	if p := d.peak.Load(); p != 1 {
		t.Errorf("%d reads of every tenant's days ran at once for 4 Overviews; want 1", p)
	}
	for i, code := range codes {
		if code != http.StatusOK {
			t.Errorf("Overview %d: %d", i, code)
		}
	}
}
