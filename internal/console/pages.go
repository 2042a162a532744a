package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"
)

// page is what every template gets: the layout's parts and the page's
// own data.
type page struct {
	Title string
	Nav   string // which nav entry is current
	Flash string // a fixed notice of the console's own
	Error string // a refusal's message
	Data  any
}

var funcs = template.FuncMap{
	"dollars": Dollars,
	"count":   Count,
	"group":   Group,
	"percent": Percent,
	"millis":  Millis,
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04:05") + " UTC"
	},
	"whenp": func(t *time.Time) string {
		if t == nil {
			return "–"
		}
		return t.UTC().Format("2006-01-02 15:04") + " UTC"
	},
}

// parsePages parses each page with the layout.
func parsePages() map[string]*template.Template {
	out := map[string]*template.Template{}
	for _, name := range []string{"login", "overview", "tenants", "tenant", "upstreams", "audit", "error"} {
		t := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/parts.html", "templates/"+name+".html"))
		out[name] = t
	}
	return out
}

// render writes page name with status; it renders into a buffer first, so
// a template error is a clean 500, not half a page.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	var buf bytes.Buffer
	t, tmpl, data := c.pages[name], "layout.html", any(p)
	if name == "live" { // the Overview's live part alone
		t, tmpl, data = c.pages["overview"], "live", p.Data
	}
	if err := t.ExecuteTemplate(&buf, tmpl, data); err != nil {
		c.log.Error("console: render", slog.String("page", name), slog.String("error", err.Error()))
		http.Error(w, "The console could not render this page.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with a message of the console's own.
func (c *Console) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	c.render(w, r, status, "error", page{Title: http.StatusText(status), Error: msg})
}

// refused renders err (a Backend error) on an error page: a refusal with
// its status and message, a failure as 503.
func (c *Console) refused(w http.ResponseWriter, r *http.Request, err error) {
	var e *Error
	if errors.As(err, &e) {
		c.fail(w, r, e.Status, e.Text())
		return
	}
	c.log.Error("console: backend", slog.String("error", err.Error()))
	c.fail(w, r, http.StatusServiceUnavailable, "The gateway could not answer (its store is unreachable); retry shortly.")
}

// totals are the figures summed over tenants.
type totals struct {
	Usage
	Tenants int
	// Today's figures, from the usage days.
	TodayRequests int64
	TodayCost     int64
	TodaySaved    int64
}

// Served is the requests answered without an upstream call.
func (t totals) Served() int64 { return t.Hits + t.Stale + t.Coalesced }

func sum(u *Usage, o Usage) {
	u.Requests += o.Requests
	u.Hits += o.Hits
	u.Coalesced += o.Coalesced
	u.Stale += o.Stale
	u.Negative += o.Negative
	u.Bypass += o.Bypass
	u.UpstreamCalls += o.UpstreamCalls
	u.Tokens += o.Tokens
	u.TokensSaved += o.TokensSaved
	u.CostNanos += o.CostNanos
	u.SavedNanos += o.SavedNanos
	u.UnpricedCalls += o.UnpricedCalls
}

// liveData is the Overview's part that refreshes on its own.
type liveData struct {
	Totals    totals
	Flights   int64
	Upstreams []Upstream
	Hour      hourChart
	Days      dayChart
	Now       time.Time
	Missing   []string // tenants whose usage could not be read
}

func (c *Console) live(r *http.Request) liveData {
	ctx := r.Context()
	d := liveData{Flights: int64(c.b.FlightsInProgress()), Upstreams: c.b.Upstreams(), Now: c.now().UTC()}
	d.Totals, d.Missing = c.totals(ctx)
	today := d.Now.Truncate(24 * time.Hour)
	rows, err := c.usageDays(ctx, today.AddDate(0, 0, -29), today)
	if err != nil {
		d.Missing = append(d.Missing, "usage days")
	}
	day := today.Format(time.DateOnly)
	for _, row := range rows {
		if row.Day == day {
			d.Totals.TodayRequests += row.Requests
			d.Totals.TodayCost += row.CostNanos
			d.Totals.TodaySaved += row.SavedNanos
		}
	}
	d.Days = newDayChart(today, rows)
	outcomes, minutes := c.b.LastHour()
	d.Hour = newHourChart(outcomes, minutes)
	return d
}

// totals sums every tenant's usage (GET /admin/tenants/{id}/usage, every
// instance's), the one source of the figures a page shows for all
// tenants; missing lists the tenants whose usage could not be read.
func (c *Console) totals(ctx context.Context) (t totals, missing []string) {
	ts := c.b.Tenants(ctx)
	for i, r := range c.usages(ctx, ts) {
		if r.err != nil {
			missing = append(missing, ts[i].ID)
			continue
		}
		t.Tenants++
		sum(&t.Usage, r.u)
	}
	return t, missing
}

// usageReads bounds the usage reads the console makes at once, over all
// its pages and visitors together: each is a Redis round trip or two in
// distributed mode, a gateway may have thousands of tenants, and the
// Overview refreshes itself every 5 seconds in every open tab.
const usageReads = 16

// usageWait bounds how long one page waits for its tenants' usage: a
// tenant not read by then (Redis slow or away, or the reads queued behind
// other pages') is listed as unavailable rather than holding the page.
const usageWait = 5 * time.Second

type usageResult struct {
	u   Usage
	err error
}

// usages reads every tenant's usage, at most usageReads at a time across
// the console, for at most c.usageWait; the results are in ts's order.
func (c *Console) usages(ctx context.Context, ts []Tenant) []usageResult {
	ctx, cancel := context.WithTimeout(ctx, c.usageWait)
	defer cancel()
	out := make([]usageResult, len(ts))
	var wg sync.WaitGroup
	for i, t := range ts {
		if ctx.Err() != nil { // checked first: a slot freed by a read that ended with ctx must not start another
			out[i].err = ctx.Err()
			continue
		}
		select {
		case c.reads <- struct{}{}:
		case <-ctx.Done():
			out[i].err = ctx.Err()
			continue
		}
		wg.Go(func() {
			defer func() { <-c.reads }()
			u, err := c.b.Usage(ctx, t.ID)
			out[i] = usageResult{u, err}
		})
	}
	wg.Wait()
	return out
}

func (c *Console) handleOverview(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Data: c.live(r)})
}

// handleLive answers the Overview's live part alone, for its refresh.
func (c *Console) handleLive(w http.ResponseWriter, r *http.Request) {
	c.render(w, r, http.StatusOK, "live", page{Data: c.live(r)})
}

// tenantRow is one line of the Tenants table.
type tenantRow struct {
	Tenant
	Usage         Usage
	UsageOK       bool
	TodayRequests int64
}

// Served is the tenant's requests answered without an upstream call.
func (t tenantRow) Served() int64 { return t.Usage.Hits + t.Usage.Stale + t.Usage.Coalesced }

func (c *Console) handleTenants(w http.ResponseWriter, r *http.Request) {
	c.renderTenants(w, r, http.StatusOK, "", "")
}

func (c *Console) renderTenants(w http.ResponseWriter, r *http.Request, status int, flash, errMsg string) {
	ctx := r.Context()
	today := c.now().UTC().Truncate(24 * time.Hour)
	rows, _ := c.usageDays(ctx, today, today)
	byTenant := map[string]int64{}
	for _, row := range rows {
		byTenant[row.Tenant] += row.Requests
	}
	var out []tenantRow
	ts := c.b.Tenants(ctx)
	for i, r := range c.usages(ctx, ts) {
		tr := tenantRow{Tenant: ts[i], TodayRequests: byTenant[ts[i].ID]}
		if r.err == nil {
			tr.Usage, tr.UsageOK = r.u, true
		}
		out = append(out, tr)
	}
	c.render(w, r, status, "tenants", page{Title: "Tenants", Nav: "tenants", Flash: flash, Error: errMsg, Data: out})
}

// handleCreateTenant creates an API tenant from the form: an id and an
// optional policy (a JSON object of tenants-file fields).
func (c *Console) handleCreateTenant(w http.ResponseWriter, r *http.Request) {
	id := strings.TrimSpace(r.PostFormValue("id"))
	policy := strings.TrimSpace(r.PostFormValue("policy"))
	if policy == "" {
		policy = "{}"
	}
	if err := c.b.CreateTenant(r.Context(), r.RemoteAddr, id, []byte(policy)); err != nil {
		var e *Error
		if errors.As(err, &e) {
			c.renderTenants(w, r, e.Status, "", e.Text())
			return
		}
		c.refused(w, r, err)
		return
	}
	http.Redirect(w, r, tenantURL(id)+"?done=created", http.StatusSeeOther)
}

func tenantURL(id string) string { return Prefix + "/tenants/" + url.PathEscape(id) }

// tenantPage is a tenant's page.
type tenantPage struct {
	Tenant     Tenant
	PolicyText string
	Keys       []Key
	KeysErr    string
	NewKey     *NewKey
	Usage      Usage
	UsageErr   string
	Models     []modelRow
	Days       []DayRow
}

type modelRow struct {
	Name string
	ModelUsage
}

// flashes are the notices a redirect after a change may ask for: fixed
// texts, so no query string reaches a page as a message.
var flashes = map[string]string{
	"created": "Tenant created.",
	"patched": "Policy saved.",
	"revoked": "Key revoked: it stops working on every instance within a second.",
	"purged":  "Cache purged.",
}

func (c *Console) handleTenant(w http.ResponseWriter, r *http.Request) {
	c.renderTenant(w, r, http.StatusOK, chi.URLParam(r, "id"), flashes[r.URL.Query().Get("done")], "", nil)
}

func (c *Console) renderTenant(w http.ResponseWriter, r *http.Request, status int, id, flash, errMsg string, nk *NewKey) {
	ctx := r.Context()
	t, err := c.b.Tenant(ctx, id)
	if err != nil {
		c.refused(w, r, err)
		return
	}
	p := tenantPage{Tenant: t, NewKey: nk, PolicyText: prettyJSON(t.Policy)}
	if t.Source == "api" {
		if p.Keys, err = c.b.Keys(ctx, id); err != nil {
			p.KeysErr = message(err)
		}
	}
	if p.Usage, err = c.b.Usage(ctx, id); err != nil {
		p.UsageErr = message(err)
	}
	for name, m := range p.Usage.ByModel {
		p.Models = append(p.Models, modelRow{name, m})
	}
	slices.SortFunc(p.Models, func(a, b modelRow) int { return strings.Compare(a.Name, b.Name) })
	today := c.now().UTC().Truncate(24 * time.Hour)
	if rows, err := c.b.TenantDays(ctx, id, today.AddDate(0, 0, -29), today); err == nil {
		for _, row := range rows {
			if row.Tenant == id {
				p.Days = append(p.Days, row)
			}
		}
		slices.Reverse(p.Days) // newest first
	}
	c.render(w, r, status, "tenant", page{Title: "Tenant " + id, Nav: "tenants", Flash: flash, Error: errMsg, Data: p})
}

func message(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Text()
	}
	return "Unavailable right now (the store is unreachable)."
}

func prettyJSON(raw json.RawMessage) string {
	var buf bytes.Buffer
	if len(raw) == 0 || json.Indent(&buf, raw, "", "  ") != nil {
		return "{}"
	}
	return buf.String()
}

// change runs one change of tenant id from a form and answers it: a
// refusal re-renders the tenant's page with its message and status, a
// success redirects to the page with the notice done.
func (c *Console) change(w http.ResponseWriter, r *http.Request, done string, do func(id string) error) {
	id := chi.URLParam(r, "id")
	if err := do(id); err != nil {
		c.tenantRefused(w, r, id, err)
		return
	}
	http.Redirect(w, r, tenantURL(id)+"?done="+done, http.StatusSeeOther)
}

// tenantRefused answers a refused change of tenant id: its page again
// with the refusal's message and status, or, for a tenant that is not
// there (or a failure with no message for people), the refusal page.
func (c *Console) tenantRefused(w http.ResponseWriter, r *http.Request, id string, err error) {
	var e *Error
	if errors.As(err, &e) && e.Status != http.StatusNotFound {
		c.renderTenant(w, r, e.Status, id, "", e.Text(), nil)
		return
	}
	c.refused(w, r, err)
}

// handlePatchTenant applies the form's JSON merge patch to the policy.
func (c *Console) handlePatchTenant(w http.ResponseWriter, r *http.Request) {
	c.change(w, r, "patched", func(id string) error {
		return c.b.PatchTenant(r.Context(), r.RemoteAddr, id, []byte(strings.TrimSpace(r.PostFormValue("patch"))))
	})
}

func (c *Console) handleRevokeKey(w http.ResponseWriter, r *http.Request) {
	c.change(w, r, "revoked", func(id string) error {
		return c.b.RevokeKey(r.Context(), r.RemoteAddr, id, chi.URLParam(r, "key_id"))
	})
}

func (c *Console) handlePurge(w http.ResponseWriter, r *http.Request) {
	c.change(w, r, "purged", func(id string) error {
		_, err := c.b.Purge(r.Context(), id)
		return err
	})
}

// handleDeleteTenant removes an API tenant, then shows the Tenants page.
func (c *Console) handleDeleteTenant(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	if r.PostFormValue("confirm") != "yes" {
		c.renderTenant(w, r, http.StatusBadRequest, id, "", "Tick the box to confirm the deletion; nothing was changed.", nil)
		return
	}
	if err := c.b.DeleteTenant(r.Context(), r.RemoteAddr, id); err != nil {
		c.tenantRefused(w, r, id, err)
		return
	}
	c.renderTenants(w, r, http.StatusOK, "Tenant deleted; its keys no longer work.", "")
}

// handleCreateKey makes a key and shows it this once, on the tenant's
// page (not a redirect: the key is never in a URL or a cookie).
func (c *Console) handleCreateKey(w http.ResponseWriter, r *http.Request) {
	id := chi.URLParam(r, "id")
	k, err := c.b.CreateKey(r.Context(), r.RemoteAddr, id, strings.TrimSpace(r.PostFormValue("name")))
	if err != nil {
		c.tenantRefused(w, r, id, err)
		return
	}
	c.renderTenant(w, r, http.StatusCreated, id, "Key created. Copy it now: it is shown this once.", "", &k)
}

// upstreamsPage is the Upstreams page: this instance's attempts per
// upstream, and the upstream calls made for tenants on every instance
// (the Overview's figure, from the same usage counters).
type upstreamsPage struct {
	Upstreams []Upstream
	Totals    totals
	Missing   []string
	Now       time.Time
}

func (c *Console) handleUpstreams(w http.ResponseWriter, r *http.Request) {
	p := upstreamsPage{Upstreams: c.b.Upstreams(), Now: c.now()}
	p.Totals, p.Missing = c.totals(r.Context())
	c.render(w, r, http.StatusOK, "upstreams", page{Title: "Upstreams", Nav: "upstreams", Data: p})
}

// auditShown is how many events the Audit page lists.
const auditShown = 500

func (c *Console) handleAudit(w http.ResponseWriter, r *http.Request) {
	evs, err := c.b.Audit(r.Context(), auditShown)
	if err != nil {
		c.render(w, r, http.StatusOK, "audit", page{Title: "Audit", Nav: "audit", Error: message(err)})
		return
	}
	c.render(w, r, http.StatusOK, "audit", page{Title: "Audit", Nav: "audit", Data: evs})
}
