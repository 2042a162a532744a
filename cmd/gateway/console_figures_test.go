package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/corralhq/corral/internal/mockllm"
)

// figuresUpstreams serves two upstreams in front of one mock model with a
// latency (so a burst coalesces): a, tried first, answers 503 to a prompt
// holding "[503 on a]", so that call fails over to b; both cut the
// connection on "[cut]", an upstream failure. It returns the upstreams
// file and the number of attempts both received.
func figuresUpstreams(t *testing.T) (file string, attempts *atomic.Int64) {
	t.Helper()
	mock := mockllm.New(mockllm.Options{Latency: 300 * time.Millisecond})
	attempts = &atomic.Int64{}
	serve := func(name string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if r.Method == http.MethodPost {
				attempts.Add(1)
			}
			switch {
			case bytes.Contains(body, []byte("[cut]")):
				conn, _, err := http.NewResponseController(w).Hijack()
				if err == nil {
					conn.Close()
				}
				return
			case name == "a" && bytes.Contains(body, []byte("[503 on a]")):
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusServiceUnavailable)
				_, _ = io.WriteString(w, `{"error":{"message":"a is busy","type":"server_error"}}`)
				return
			}
			mock.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	a, b := serve("a"), serve("b")
	file = writeFile(t, filepath.Join(t.TempDir(), "upstreams.yaml"), "upstreams:\n"+
		"  - name: a\n    url: "+a.URL+"/v1\n    priority: 1\n"+
		"  - name: b\n    url: "+b.URL+"/v1\n    priority: 2\n")
	return file, attempts
}

// sendChat posts a chat request with model and text as key, with headers
// hdr (name, value, ...), and returns its status and X-Corral-Cache.
func sendChat(t *testing.T, base, key, model, text string, hdr ...string) (int, string) {
	t.Helper()
	m, _ := json.Marshal(model)
	s, _ := json.Marshal(text)
	return sendRaw(t, base, key, `{"model":`+string(m)+`,"messages":[{"role":"user","content":`+string(s)+`}]}`, hdr...)
}

func sendRaw(t *testing.T, base, key, body string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, _ := consoleDo(t, req)
	return resp.StatusCode, resp.Header.Get("X-Corral-Cache")
}

// usageFigures is one tenant's usage as GET /admin/tenants/{id}/usage
// answers it, in whole numbers and nano-dollars.
type usageFigures struct {
	Requests, Hits, Coalesced, Bypass, UpstreamCalls, Tokens, TokensSaved, Cost, Saved int64
	ByModel                                                                            map[string]modelFigures
}

// modelFigures is one model's part: of by_model, or summed over the rows
// of GET /admin/usage.
type modelFigures struct{ Requests, UpstreamCalls, InputTokens, OutputTokens, Cost, Saved int64 }

func (m *modelFigures) add(o modelFigures) {
	m.Requests += o.Requests
	m.UpstreamCalls += o.UpstreamCalls
	m.InputTokens += o.InputTokens
	m.OutputTokens += o.OutputTokens
	m.Cost += o.Cost
	m.Saved += o.Saved
}

func modelOf(t *testing.T, raw map[string]json.Number) modelFigures {
	t.Helper()
	return modelFigures{num(t, raw["requests"]), num(t, raw["upstream_calls"]), num(t, raw["input_tokens"]), num(t, raw["output_tokens"]),
		nanos(t, raw["cost_usd"]), nanos(t, raw["saved_usd"])}
}

func usageFiguresOf(t *testing.T, base, id string) usageFigures {
	t.Helper()
	var raw struct {
		Requests, Hits, Coalesced, Bypass, Tokens json.Number
		UpstreamCalls                             json.Number                       `json:"upstream_calls"`
		TokensSaved                               json.Number                       `json:"tokens_saved"`
		CostUSD                                   json.Number                       `json:"cost_usd"`
		SavedUSD                                  json.Number                       `json:"saved_usd"`
		ByModel                                   map[string]map[string]json.Number `json:"by_model"`
	}
	getJSON(t, base, "/admin/tenants/"+id+"/usage", &raw)
	u := usageFigures{num(t, raw.Requests), num(t, raw.Hits), num(t, raw.Coalesced), num(t, raw.Bypass), num(t, raw.UpstreamCalls),
		num(t, raw.Tokens), num(t, raw.TokensSaved), nanos(t, raw.CostUSD), nanos(t, raw.SavedUSD), map[string]modelFigures{}}
	for name, m := range raw.ByModel {
		u.ByModel[name] = modelOf(t, m)
	}
	return u
}

// dayRows reads GET /admin/usage for one day: tenant → model → figures.
func dayRows(t *testing.T, base, day string) map[string]map[string]modelFigures {
	t.Helper()
	var raw struct {
		Rows []map[string]json.RawMessage `json:"rows"`
	}
	getJSON(t, base, "/admin/usage?from="+day+"&to="+day, &raw)
	out := map[string]map[string]modelFigures{}
	for _, row := range raw.Rows {
		var tenant, model string
		_ = json.Unmarshal(row["tenant"], &tenant)
		_ = json.Unmarshal(row["model"], &model)
		nums := map[string]json.Number{}
		for k, v := range row {
			var n json.Number
			if json.Unmarshal(v, &n) == nil {
				nums[k] = n
			}
		}
		if out[tenant] == nil {
			out[tenant] = map[string]modelFigures{}
		}
		m := out[tenant][model]
		m.add(modelOf(t, nums))
		out[tenant][model] = m
	}
	return out
}

func getJSON(t *testing.T, base, path string, v any) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	req.Header.Set("Authorization", "Bearer adm")
	resp, body := consoleDo(t, req)
	dec := json.NewDecoder(strings.NewReader(body))
	dec.UseNumber()
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	if err := dec.Decode(v); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
}

// figure reads the exact figure of the first .num inside sel: its
// data-value, or its data-nanos for an amount.
func (tb *tab) figure(t *testing.T, sel string) int64 {
	t.Helper()
	v := eval[string](t, tb, `(() => { const e = document.querySelector(`+strconv.Quote(sel)+`);
		const n = e && (e.matches(".num") ? e : e.querySelector(".num"));
		return n ? (n.getAttribute("data-value") ?? n.getAttribute("data-nanos")) : "missing" })()`)
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Errorf("figure %s: %q", sel, v)
		return -1
	}
	return n
}

// modelTable reads a by-model table (#by-model) as model → figures.
func (tb *tab) modelTable(t *testing.T) map[string]modelFigures {
	t.Helper()
	rows := eval[[]map[string]string](t, tb, `Array.from(document.querySelectorAll("#by-model tbody tr[data-model]")).map(tr => {
		const o = {model: tr.getAttribute("data-model")};
		tr.querySelectorAll("td[data-field] .num").forEach(n => { o[n.closest("td").getAttribute("data-field")] = n.getAttribute("data-value") ?? n.getAttribute("data-nanos") });
		o.shown = tr.querySelector("td.model").textContent;
		return o })`)
	out := map[string]modelFigures{}
	for _, r := range rows {
		n := func(k string) int64 {
			v, err := strconv.ParseInt(r[k], 10, 64)
			if err != nil {
				t.Fatalf("by-model row %v: %s is %q", r, k, r[k])
			}
			return v
		}
		if r["shown"] != r["model"] {
			t.Errorf("by-model row %q shows %q", r["model"], r["shown"])
		}
		out[r["model"]] = modelFigures{n("requests"), n("upstream-calls"), n("input-tokens"), n("output-tokens"), n("cost"), n("saved")}
	}
	return out
}

// TestConsoleFiguresAgree: after a mix of traffic on two instances
// (MISS, HIT, COALESCED, BYPASS, a failover, an upstream failure, a
// refused request, two models and two tenants, all today), every page
// of the console shows the same figure wherever it shows one, and the
// usage API's: the Overview's totals and today's, the Tenants list, each
// tenant's page (its tiles, its by-model table by model name, its
// days) and the Upstreams page's calls.
func TestConsoleFiguresAgree(t *testing.T) {
	file, attempts := figuresUpstreams(t)
	// gpt-4o at a dollar a token, and a long prompt: amounts of six
	// figures, as a busy gateway's Overview shows.
	prices := writeFile(t, filepath.Join(t.TempDir(), "prices.yaml"), consolePrices+`  - model: "gpt-4o"
    input_per_mtok: 1000000
    output_per_mtok: 1000000
`)
	bases := consoleGateways(t, 2, mockllm.Options{}, "CORRAL_UPSTREAMS_FILE="+file, "CORRAL_PRICES_FILE="+prices)
	a, b := bases[0], bases[1]
	mustAdmin(t, http.StatusCreated, a, "POST", "/admin/tenants", `{"id":"search"}`)
	key, _ := newKeyOn(t, a, "search", `{"name":"indexer"}`)
	newKeyOn(t, a, "search", `{"name":"nightly-reindex","expires_at":"`+time.Now().AddDate(1, 0, 0).UTC().Format(time.RFC3339)+`"}`)

	scriptedLoad(t, a) // acme: MISS, HIT, COALESCED; beta: MISS, HIT
	expect := func(code int, cache string, wantCode int, wantCache string) {
		t.Helper()
		if code != wantCode || cache != wantCache {
			t.Fatalf("%d %s; want %d %s", code, cache, wantCode, wantCache)
		}
	}
	for _, want := range []string{"MISS", "HIT"} { // a second model
		code, cache := sendChat(t, a, "sk-wired", "gpt-4o", "acme on the second model"+strings.Repeat(" word", 150_000))
		expect(code, cache, 200, want)
	}
	code, cache := sendChat(t, a, "sk-wired", "gpt-4o-mini", "acme never stored", "Cache-Control", "no-store")
	expect(code, cache, 200, "BYPASS")
	code, cache = sendChat(t, a, "sk-wired", "gpt-4o-mini", "acme [503 on a]") // fails over to b
	expect(code, cache, 200, "MISS")
	if code, _ = sendChat(t, a, "sk-wired", "gpt-4o-mini", "acme [cut]"); code != http.StatusBadGateway {
		t.Fatalf("an upstream failure: %d; want 502", code)
	}
	if code, _ = sendRaw(t, a, "sk-wired", `{"model":`); code != http.StatusBadRequest { // refused, no model named
		t.Fatalf("a broken body: %d; want 400", code)
	}
	for i := range 4 {
		if code, _ = sendChat(t, a, key, "gpt-4o", fmt.Sprintf("search query %d", i%2)); code != 200 {
			t.Fatalf("search's query %d: %d", i, code)
		}
	}
	beforeB := attempts.Load()
	code, cache = sendChat(t, b, key, "gpt-4o-mini", "search from the other instance")
	expect(code, cache, 200, "MISS")
	attemptsOfB := attempts.Load() - beforeB

	// Every request is counted once its access line is written, and
	// every instance's counters reach Redis within a flush.
	want := map[string]int64{"acme": 12 + 6, "beta": 3, "search": 5}
	within(t, 5*time.Second, "the load counted", func() bool {
		for id, n := range want {
			if usageFiguresOf(t, a, id).Requests != n {
				return false
			}
		}
		return true
	})
	today := time.Now().UTC().Format(time.DateOnly)
	usages := map[string]usageFigures{}
	var total usageFigures
	for id := range want {
		u := usageFiguresOf(t, a, id)
		usages[id] = u
		total.Requests += u.Requests
		total.Hits += u.Hits
		total.Coalesced += u.Coalesced
		total.UpstreamCalls += u.UpstreamCalls
		total.Tokens += u.Tokens
		total.TokensSaved += u.TokensSaved
		total.Cost += u.Cost
		total.Saved += u.Saved
	}
	if u := usages["acme"]; u.Hits < 4 || u.Coalesced < 1 || u.Bypass != 1 {
		t.Fatalf("acme's usage: %+v; want HITs, COALESCED answers and a BYPASS", u)
	}

	// The usage API agrees with itself: by_model sums to the totals, and
	// the day's rows (GET /admin/usage) are the totals on a day with all
	// the traffic; models are named by name, never by a price's glob.
	days := dayRows(t, a, today)
	for id, u := range usages {
		var sum modelFigures
		for name, m := range u.ByModel {
			sum.add(m)
			if strings.ContainsAny(name, "*?[") {
				t.Errorf("%s's usage by model names %q, a price's glob; want the model's name", id, name)
			}
		}
		if got, want := sum, (modelFigures{u.Requests, u.UpstreamCalls, sum.InputTokens, sum.OutputTokens, u.Cost, u.Saved}); got != want {
			t.Errorf("%s: by_model sums to %+v; the totals are %+v", id, got, want)
		}
		if sum.InputTokens+sum.OutputTokens != u.Tokens {
			t.Errorf("%s: by_model's tokens sum to %d; tokens is %d", id, sum.InputTokens+sum.OutputTokens, u.Tokens)
		}
		if !maps.Equal(days[id], u.ByModel) {
			t.Errorf("%s: GET /admin/usage's rows for today %+v; by_model %+v", id, days[id], u.ByModel)
		}
	}
	for _, name := range []string{"gpt-4o-mini", "gpt-4o"} {
		if _, ok := usages["acme"].ByModel[name]; !ok {
			t.Errorf("acme's usage by model has no %q: %v", name, slices.Sorted(maps.Keys(usages["acme"].ByModel)))
		}
	}

	tb := newTab(t)
	tb.do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	tb.signIn(t, a, "adm")
	// The Overview: totals, today's figures and the calls made.
	for _, f := range []struct {
		field string
		want  int64
	}{
		{"requests", total.Requests}, {"today-requests", total.Requests}, {"calls-saved", total.Hits + total.Coalesced},
		{"calls-made", total.UpstreamCalls}, {"tokens", total.Tokens}, {"tokens-saved", total.TokensSaved},
		{"cost", total.Cost}, {"today-cost", total.Cost}, {"saved", total.Saved}, {"today-saved", total.Saved},
	} {
		if got := tb.figure(t, `#live [data-field="`+f.field+`"]`); got != f.want {
			t.Errorf("Overview %s = %d; want %d (the usage API's)", f.field, got, f.want)
		}
	}
	tb.clean(t, "Overview")

	tb.do(t, "the tenants", chromedp.Navigate(a+"/console/tenants"), chromedp.WaitVisible("#tenants"))
	for id, u := range usages {
		row := `#tenants tr[data-tenant="` + id + `"] `
		var today modelFigures
		for _, m := range days[id] {
			today.add(m)
		}
		for _, f := range []struct {
			field     string
			got, want int64
		}{
			{"requests", tb.figure(t, row+`[data-field="requests"]`), u.Requests},
			{"today", tb.figure(t, row+`[data-field="today"]`), today.Requests},
			{"today (all today's traffic)", tb.figure(t, row+`[data-field="today"]`), u.Requests},
			{"cost", tb.figure(t, row+`[data-field="cost"]`), u.Cost},
		} {
			if f.got != f.want {
				t.Errorf("Tenants: %s's %s = %d; want %d", id, f.field, f.got, f.want)
			}
		}
	}
	tb.clean(t, "Tenants")

	for id, u := range usages {
		tb.do(t, id+"'s page", chromedp.Navigate(a+"/console/tenants/"+id), chromedp.WaitVisible("#tenant-usage"))
		for _, f := range []struct {
			field string
			want  int64
		}{
			{"requests", u.Requests}, {"hits", u.Hits}, {"coalesced", u.Coalesced}, {"upstream-calls", u.UpstreamCalls},
			{"tokens", u.Tokens}, {"tokens-saved", u.TokensSaved}, {"cost", u.Cost}, {"saved", u.Saved},
		} {
			if got := tb.figure(t, `#tenant-usage [data-field="`+f.field+`"]`); got != f.want {
				t.Errorf("%s's page: %s = %d; want %d (the usage API's)", id, f.field, got, f.want)
			}
		}
		table := tb.modelTable(t)
		if !maps.Equal(table, u.ByModel) {
			t.Errorf("%s's page by model: %+v; the usage API's by_model %+v", id, table, u.ByModel)
		}
		var sum modelFigures
		for _, m := range table {
			sum.add(m)
		}
		if sum.Requests != u.Requests || sum.UpstreamCalls != u.UpstreamCalls || sum.Cost != u.Cost || sum.Saved != u.Saved {
			t.Errorf("%s's page: the by-model table sums to %+v; its tiles say %d requests, %d upstream calls, %d spent, %d saved",
				id, sum, u.Requests, u.UpstreamCalls, u.Cost, u.Saved)
		}
		dayReqs := eval[[]string](t, tb, `Array.from(document.querySelectorAll("#by-day tbody tr[data-day]")).map(tr => tr.getAttribute("data-day") + " " + tr.querySelector('[data-field="requests"] .num').getAttribute("data-value"))`)
		var perDay int64
		for _, d := range dayReqs {
			day, n, _ := strings.Cut(d, " ")
			if day != today {
				t.Errorf("%s's page lists a day %s; all the traffic was on %s", id, day, today)
			}
			v, _ := strconv.ParseInt(n, 10, 64)
			perDay += v
		}
		if perDay != u.Requests {
			t.Errorf("%s's page: today's rows by day sum to %d requests; its usage says %d", id, perDay, u.Requests)
		}
		tb.clean(t, id+"'s page")
	}

	// Upstreams: the calls made are the Overview's (every instance's, one
	// per call however many upstreams it tried); the attempts are this
	// instance's, a failover's two included.
	tb.do(t, "the upstreams", chromedp.Navigate(a+"/console/upstreams"), chromedp.WaitVisible("h1"))
	if got := tb.figure(t, `[data-field="calls-made"]`); got != total.UpstreamCalls {
		t.Errorf("Upstreams: calls made %d; the Overview's and the usage API's %d", got, total.UpstreamCalls)
	}
	var tried int64
	for _, name := range []string{"a", "b"} {
		tried += tb.figure(t, `tr[data-upstream="`+name+`"] [data-field="attempts"]`)
	}
	if want := attempts.Load() - attemptsOfB; tried != want {
		t.Errorf("Upstreams: %d attempts on this instance; the upstreams received %d from it", tried, want)
	}
	tb.clean(t, "Upstreams")

	// At 1280×800: the Keys table's Revoke buttons are inside the table's
	// visible box, and no amount is broken over two lines, on any page.
	tb.do(t, "search's keys", chromedp.Navigate(a+"/console/tenants/search"), chromedp.WaitVisible("#keys"))
	cut := eval[[]string](t, tb, `Array.from(document.querySelectorAll("#keys button.danger")).filter(b => {
		const r = b.getBoundingClientRect(), box = b.closest(".scroll").getBoundingClientRect();
		return r.width === 0 || r.left < box.left || r.right > box.right || r.right > document.documentElement.clientWidth
	}).map(b => b.getAttribute("aria-label"))`)
	if len(cut) != 0 {
		t.Errorf("at 1280 px, Revoke buttons cut off: %v", cut)
	}

	for _, p := range []string{"/console/", "/console/tenants", "/console/tenants/search", "/console/tenants/acme"} {
		tb.do(t, p, chromedp.Navigate(a+p), chromedp.WaitVisible("h1"))
		broken := eval[[]string](t, tb, `Array.from(document.querySelectorAll("[data-nanos]")).filter(e => {
			const lh = parseFloat(getComputedStyle(e).lineHeight) || parseFloat(getComputedStyle(e).fontSize) * 1.45;
			return e.getClientRects().length !== 1 || e.getBoundingClientRect().height > lh * 1.5
		}).map(e => e.textContent)`)
		if len(broken) != 0 {
			t.Errorf("%s at 1280 px: amounts over two lines: %q", p, broken)
		}
		tb.clean(t, p+" at 1280 px")
	}
}
