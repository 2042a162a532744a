package bench

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Targets of the tenant-hit scenario.
const (
	tenantPlain   = "corral-plain"           // one tenant, no prices, no budget
	tenantPriced  = "corral-priced-budget"   // the same tenant with prices and budgets
	tenantOneAPI  = "corral-1-api-tenant"    // the plain tenant plus one made through the admin API: tenantMany's configuration
	tenantMany    = "corral-10k-api-tenants" // one tenant plus apiTenants made through the admin API
	benchAdmin    = "corral-bench-admin-token"
	apiTenants    = 10000
	createWorkers = 16
)

// tenantHit is the tenant-hit scenario: the hit path of a tenant with a
// prices file and day and month budgets, and of a gateway holding
// apiTenants tenants created through POST /admin/tenants (the in-memory
// mirror of the tenant store), each against the same embedded gateway
// with one plain tenant, in one run. The many-tenant gateway is also
// compared with one configured the same way (an admin token, a tenant
// store) holding a single API tenant, so the ratio isolates the count. Hits make no budget call, so the
// priced side's Redis work per hit (Redis mode) should be that of the
// plain side.
func (h *harness) tenantHit(ctx context.Context) error {
	priced, err := h.pricedTenantsFile()
	if err != nil {
		return err
	}
	prices := filepath.Join(h.o.SourceDir, "deploy", "prices.yaml")
	plain, err := h.c.startGateway(ctx, "corral-plain", false)
	if err != nil {
		return fmt.Errorf("gateway (plain): %w", err)
	}
	pb, err := h.c.startGateway(ctx, "corral-priced", false, "CORRAL_TENANTS_FILE="+priced, "CORRAL_PRICES_FILE="+prices)
	if err != nil {
		return fmt.Errorf("gateway (priced): %w", err)
	}
	one, err := h.c.startGateway(ctx, "corral-one-api", false, "CORRAL_ADMIN_TOKEN="+benchAdmin)
	if err != nil {
		return fmt.Errorf("gateway (one API tenant): %w", err)
	}
	if err := createTenants(ctx, "http://"+one.addr, 1); err != nil {
		return fmt.Errorf("create one API tenant: %w", err)
	}
	many, err := h.c.startGateway(ctx, "corral-many", false, "CORRAL_ADMIN_TOKEN="+benchAdmin)
	if err != nil {
		return fmt.Errorf("gateway (many tenants): %w", err)
	}
	t0 := time.Now()
	if err := createTenants(ctx, "http://"+many.addr, apiTenants); err != nil {
		return fmt.Errorf("create %d API tenants: %w", apiTenants, err)
	}
	h.o.logf("created %d API tenants through POST /admin/tenants in %.1fs (%d in parallel)", apiTenants, time.Since(t0).Seconds(), createWorkers)
	ts := []target{chatTarget(tenantPlain, plain, true), chatTarget(tenantPriced, pb, true), chatTarget(tenantOneAPI, one, true), chatTarget(tenantMany, many, true)}
	hdr := benchHeader("")
	body := chatBody("What does a cache hit cost?", false, mockControl{})
	for _, t := range ts {
		if err := prime(ctx, t.url, hdr, body); err != nil {
			return fmt.Errorf("prime %s: %w", t.name, err)
		}
	}
	cs := caseSpec{scenario: ScenarioTenantHit, name: hitCase()}
	gs, err := h.compare(ctx, cs, ts, func(ctx context.Context, t target) (RunResult, error) {
		spec := reqSpec{url: t.url, header: hdr, body: constBody(body), wantCache: t.want("HIT")}
		return closedLoop(ctx, spec, hitConns, h.o.Warmup, h.o.Duration, h.watch(t)), nil
	})
	if err != nil {
		return err
	}
	h.rep.TenantHit = gs
	writeTenantHit(h.o.Tables, gs)
	return nil
}

// pricedTenantsFile writes the bench tenant with day and month budgets far
// above what the priming spends.
func (h *harness) pricedTenantsFile() (string, error) {
	sum := sha256.Sum256([]byte(benchKey))
	s := fmt.Sprintf("tenants:\n  - id: bench\n    keys:\n      - sha256: %q\n    max_leaders: 16384\n    budget_usd_per_day: 1000\n    budget_usd_per_month: 10000\n", hex.EncodeToString(sum[:]))
	p := filepath.Join(h.c.dir, "tenants-priced.yaml")
	return p, os.WriteFile(p, []byte(s), 0o600)
}

// createTenants makes n tenants through POST /admin/tenants, createWorkers
// at a time.
func createTenants(ctx context.Context, base string, n int) error {
	c := newClient(createWorkers)
	defer c.CloseIdleConnections()
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, createWorkers)
	for range createWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(n) || ctx.Err() != nil {
					return
				}
				body := fmt.Sprintf(`{"id":"api-%05d","requests_per_minute":600}`, i)
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/admin/tenants", bytes.NewBufferString(body))
				if err != nil {
					errs <- err
					return
				}
				req.Header.Set("Authorization", "Bearer "+benchAdmin)
				req.Header.Set("Content-Type", "application/json")
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					errs <- fmt.Errorf("tenant %d: %s: %s", i, resp.Status, b)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

func writeTenantHit(w io.Writer, gs []Group) {
	fmt.Fprintf(w, "\n## Hit path by tenant setup (%s)\n\n", hitCase())
	plain := findGroup(gs, hitCase(), tenantPlain)
	one := findGroup(gs, hitCase(), tenantOneAPI)
	t := &table{head: []string{"target", "req/s", "p50 ms", "p99 ms", "req/s vs plain", "req/s vs 1 API tenant", "proxy CPU µs/req", "errors / not HIT"}}
	for i := range gs {
		g := &gs[i]
		vsOne := ""
		if g.Target == tenantMany {
			vsOne = fmtRatio(g, one, throughputOf)
		}
		t.add(g.Target, fmtRate(g.Throughput), fmtMS(g.P50), fmtMS(g.P99), fmtRatio(g, plain, throughputOf), vsOne, fmtUS(g.CPUPerRequest), fmtErrors(g))
	}
	t.write(w)
}
