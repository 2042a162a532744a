package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/corralhq/corral/internal/console"
	"github.com/corralhq/corral/internal/mockllm"
	"github.com/corralhq/corral/internal/redistest"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
)

// The console, end to end: real gateways wired from their environment
// sharing a real redis-server, the mock model, and a real headless
// chromium reading the pages.

// consoleGateways starts n gateways on one new Redis, in front of one mock
// model with opts, with the admin token "adm". Tenants of the file: acme
// (key sk-wired) and beta (key sk-beta).
func consoleGateways(t *testing.T, n int, opts mockllm.Options, env ...string) []string {
	t.Helper()
	rs := redistest.Start(t)
	up := httptest.NewServer(mockllm.New(opts))
	t.Cleanup(up.Close)
	file := writeTenantsFile(t, tenantYAML("acme", tenant.HashKey("sk-wired")), tenantYAML("beta", tenant.HashKey("sk-beta"), "requests_per_minute: 600"))
	env = append([]string{
		"CORRAL_REDIS_URL=" + rs.URL(),
		"CORRAL_UPSTREAM_URL=" + up.URL + "/v1",
		"CORRAL_TENANTS_FILE=" + file,
		"CORRAL_ADMIN_TOKEN=adm",
		"CORRAL_PRICES_FILE=" + writeFile(t, filepath.Join(t.TempDir(), "prices.yaml"), consolePrices),
	}, env...)
	var bases []string
	for range n {
		bases = append(bases, serveGateway(t, mustGateway(t, env...)).URL)
	}
	return bases
}

// consolePrices prices the mock's chat model and a model whose name is
// markup, as a client may send.
const consolePrices = `prices:
  - model: "gpt-4o-mini*"
    input_per_mtok: 150
    output_per_mtok: 600
  - model: "` + xssText + `"
    input_per_mtok: 1000
    output_per_mtok: 2000
`

// xssText is what a client might choose as a model or key name.
const xssText = "<img src=x onerror=alert(1)>"

// scriptedLoad sends, through base: acme three new prompts (misses), the
// same three again (hits) and a burst of six identical new prompts at
// once, which the mock's latency makes one upstream call (coalesced); beta
// two misses and a hit. It returns when every answer was 200.
func scriptedLoad(t *testing.T, base string) {
	t.Helper()
	send := func(key, text string) {
		t.Helper()
		if code := chatCode(t, base, key, text); code != 200 {
			t.Fatalf("%s %q: %d", key, text, code)
		}
	}
	for range 2 {
		for i := range 3 {
			send("sk-wired", fmt.Sprintf("acme prompt %d", i))
		}
	}
	codes := startBurst(6, func(int) int {
		code, _, _ := postChat(base, "sk-wired", "acme burst")
		return code
	})
	for i, c := range codes() {
		if c != 200 {
			t.Fatalf("burst request %d: %d", i, c)
		}
	}
	send("sk-beta", "beta one")
	send("sk-beta", "beta two")
	send("sk-beta", "beta one")
}

// usageOf reads GET /admin/tenants/{id}/usage with exact numbers.
func usageOf(t *testing.T, base, id string) map[string]json.Number {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/admin/tenants/"+id+"/usage", nil)
	req.Header.Set("Authorization", "Bearer adm")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var raw map[string]json.RawMessage
	if err := json.NewDecoder(resp.Body).Decode(&raw); err != nil || resp.StatusCode != 200 {
		t.Fatalf("usage of %s: %d %v", id, resp.StatusCode, err)
	}
	out := map[string]json.Number{}
	for k, v := range raw {
		var n json.Number
		if json.Unmarshal(v, &n) == nil {
			out[k] = n
		}
	}
	return out
}

func num(t *testing.T, n json.Number) int64 {
	t.Helper()
	v, err := n.Int64()
	if err != nil {
		t.Fatalf("%q is not a whole number", n)
	}
	return v
}

func nanos(t *testing.T, n json.Number) int64 {
	t.Helper()
	v, err := spend.ParseUSD(n.String())
	if err != nil {
		t.Fatalf("%q is not an amount: %v", n, err)
	}
	return int64(v)
}

// TestConsoleSignIn: a wrong token is refused with a message (401); the
// right one shows the Overview, and its cookie works on the other instance
// too; after sign-out the old cookie, replayed by a plain client, is
// refused on both instances.
func TestConsoleSignIn(t *testing.T) {
	bases := consoleGateways(t, 2, mockllm.Options{})
	a, b := bases[0], bases[1]
	tb := newTab(t)

	tb.do(t, "wrong token", chromedp.Navigate(a+"/console/"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", "not-the-token"), chromedp.Submit("#token"), chromedp.WaitVisible("#page-error"))
	if msg := tb.text(t, "#page-error"); !strings.Contains(msg, "not the admin token") {
		t.Errorf("wrong token: message %q", msg)
	}
	tb.expect(t, "status of 401") // the refusal itself
	tb.clean(t, "wrong token")
	req, _ := http.NewRequest(http.MethodPost, a+"/console/login", strings.NewReader(url.Values{"token": {"nope"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", a)
	if resp, body := consoleDo(t, req); resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Set-Cookie") != "" || !strings.Contains(body, "not the admin token") {
		t.Errorf("wrong token: %d, Set-Cookie %q", resp.StatusCode, resp.Header.Get("Set-Cookie"))
	}

	tb.signIn(t, a, "adm")
	if h := tb.text(t, "h1"); h != "Overview" {
		t.Errorf("signed in: heading %q; want Overview", h)
	}
	tb.clean(t, "sign-in")
	ck := tb.cookie(t, a)
	for _, base := range bases {
		if resp, _ := consoleGet(t, base, "/console/", ck); resp.StatusCode != http.StatusOK {
			t.Errorf("%s: the session cookie before sign-out: %d; want 200", base, resp.StatusCode)
		}
	}

	tb.do(t, "sign out", chromedp.Click("form.signout button"), chromedp.WaitVisible("#token"))
	if f := tb.text(t, ".flash"); f != "Signed out." {
		t.Errorf("after sign-out: %q", f)
	}
	for _, base := range []string{a, b} {
		resp, _ := consoleGet(t, base, "/console/", ck)
		if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/login" {
			t.Errorf("%s: the old cookie after sign-out: %d to %q; want 303 to the sign-in", base, resp.StatusCode, resp.Header.Get("Location"))
		}
		if resp, _ := consoleGet(t, base, "/console/live", ck); resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("%s: the old cookie's refresh after sign-out: %d; want 401", base, resp.StatusCode)
		}
	}
	tb.do(t, "back to the console", chromedp.Navigate(a+"/console/tenants"), chromedp.WaitVisible("#token"))
	tb.clean(t, "sign-out")
}

// TestConsoleNumbersEqualUsage: after a scripted load over two tenants,
// the Overview's figures are the sums of GET /admin/tenants/{id}/usage
// and a tenant page's are its own, read from the DOM.
func TestConsoleNumbersEqualUsage(t *testing.T) {
	bases := consoleGateways(t, 1, mockllm.Options{Latency: 300 * time.Millisecond})
	base := bases[0]
	scriptedLoad(t, base)
	// The counters are added once each answer's access line is written.
	within(t, 5*time.Second, "the load counted", func() bool {
		return num(t, usageOf(t, base, "acme")["requests"]) == 12 && num(t, usageOf(t, base, "beta")["requests"]) == 3
	})
	acme, beta := usageOf(t, base, "acme"), usageOf(t, base, "beta")
	if h, c, u := num(t, acme["hits"]), num(t, acme["coalesced"]), num(t, acme["upstream_calls"]); h != 3 || c < 1 || u+h+c != 12 {
		t.Fatalf("acme's usage: %d hits, %d coalesced, %d upstream calls; want 3 hits and a coalesced burst", h, c, u)
	}

	tb := newTab(t)
	tb.signIn(t, base, "adm")
	sum := func(field string, conv func(*testing.T, json.Number) int64) int64 {
		return conv(t, acme[field]) + conv(t, beta[field])
	}
	served := sum("hits", num) + sum("coalesced", num) // no STALE in this load
	for _, tt := range []struct {
		field, attr string
		want        int64
	}{
		{"requests", "data-value", sum("requests", num)},
		{"calls-saved", "data-value", served},
		{"tokens", "data-value", sum("tokens", num)},
		{"tokens-saved", "data-value", sum("tokens_saved", num)},
		{"cost", "data-nanos", sum("cost_usd", nanos)},
		{"saved", "data-nanos", sum("saved_usd", nanos)},
	} {
		sel := `#live [data-field="` + tt.field + `"] .num`
		got := tb.attr(t, sel, tt.attr)
		if got != strconv.FormatInt(tt.want, 10) {
			t.Errorf("Overview %s = %s; want %d (the usage API's sum)", tt.field, got, tt.want)
		}
		wantText := console.Count(tt.want)
		if tt.attr == "data-nanos" {
			wantText = console.Dollars(tt.want)
		}
		if txt := tb.text(t, sel); txt != wantText {
			t.Errorf("Overview %s shows %q; want %q", tt.field, txt, wantText)
		}
	}
	if got, want := tb.text(t, `#live [data-field="hit-rate"]`), console.Percent(served, sum("requests", num)); got != want {
		t.Errorf("Overview hit rate %q; want %q", got, want)
	}
	if sum("cost_usd", nanos) == 0 || sum("saved_usd", nanos) == 0 {
		t.Error("the load cost or saved nothing: the prices did not apply")
	}

	tb.do(t, "acme's page", chromedp.Navigate(base+"/console/tenants/acme"), chromedp.WaitVisible("#tenant-usage"))
	for _, tt := range []struct{ field, attr, api string }{
		{"requests", "data-value", "requests"}, {"hits", "data-value", "hits"}, {"coalesced", "data-value", "coalesced"},
		{"upstream-calls", "data-value", "upstream_calls"}, {"tokens", "data-value", "tokens"}, {"tokens-saved", "data-value", "tokens_saved"},
		{"cost", "data-nanos", "cost_usd"}, {"saved", "data-nanos", "saved_usd"},
	} {
		want := num
		if tt.attr == "data-nanos" {
			want = nanos
		}
		if got := tb.attr(t, `#tenant-usage [data-field="`+tt.field+`"] .num`, tt.attr); got != strconv.FormatInt(want(t, acme[tt.api]), 10) {
			t.Errorf("acme's page %s = %s; want %s (the usage API's)", tt.field, got, acme[tt.api])
		}
	}
	if m := tb.text(t, "#by-model td.model"); m != "gpt-4o-mini" { // named as the model answered, not by the price's glob
		t.Errorf("acme's usage by model: %q", m)
	}
	tb.do(t, "the tenants", chromedp.Navigate(base+"/console/tenants"), chromedp.WaitVisible("#tenants"))
	if got := tb.attr(t, `tr[data-tenant="beta"] [data-field="requests"] .num`, "data-value"); got != "3" {
		t.Errorf("Tenants: beta's requests %s; want 3", got)
	}
	if got := tb.attr(t, `tr[data-tenant="acme"] [data-field="today"] .num`, "data-value"); got != "12" {
		t.Errorf("Tenants: acme's requests today %s; want 12", got)
	}
	tb.clean(t, "numbers")
}

// TestConsoleKeyLifecycle: in the browser, create a tenant and a key and
// copy it; openai-go with the copied key gets 200; revoke it in the
// browser, and the key is 401 on another instance within 1 s.
func TestConsoleKeyLifecycle(t *testing.T) {
	bases := consoleGateways(t, 2, mockllm.Options{})
	a, b := bases[0], bases[1]
	tb := newTab(t)
	tb.signIn(t, a, "adm")
	tb.grantClipboard(t, a)
	tb.do(t, "create the tenant", chromedp.Navigate(a+"/console/tenants"), chromedp.WaitVisible("#new-id"),
		chromedp.SendKeys("#new-id", "web"), chromedp.SendKeys("#new-policy", `{"requests_per_minute": 600}`),
		chromedp.Submit("#new-id"), chromedp.WaitVisible("#key-name"))
	if f := tb.text(t, ".flash"); f != "Tenant created." {
		t.Errorf("after creating: %q", f)
	}
	tb.do(t, "create a key", chromedp.SendKeys("#key-name", "ci"), chromedp.Submit("#key-name"), chromedp.WaitVisible("#new-key"),
		chromedp.Click("button.copy"))
	tb.poll(t, `document.getElementById("copy-status").textContent !== ""`)
	if s := tb.text(t, "#copy-status"); s != "The key is on the clipboard." {
		t.Fatalf("copy: %q", s)
	}
	key := eval[string](t, tb, `navigator.clipboard.readText()`, chromedp.EvalAwaitPromise)
	if shown := eval[string](t, tb, `document.getElementById("new-key").value`); key != shown || !strings.HasPrefix(key, "sk-corral-") {
		t.Fatalf("copied %q; the page shows %q", key, shown)
	}
	tb.clean(t, "create")

	client := officialopenai.NewClient(option.WithBaseURL(a+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	_, err := client.Chat.Completions.New(context.Background(), officialopenai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("hello from the console's key")},
	})
	if err != nil {
		t.Fatalf("openai-go with the console's key: %v", err)
	}
	within(t, time.Second, "the key works on the other instance", func() bool { return chatCode(t, b, key, "on b") == 200 })

	keyID := tb.attr(t, "#keys tr[data-key]", "data-key")
	tb.do(t, "revoke", chromedp.Navigate(a+"/console/tenants/web"), chromedp.WaitVisible("#keys"),
		chromedp.Click(`#keys tr[data-key="`+keyID+`"] button`))
	tb.poll(t, `document.querySelector(".flash") !== null`)
	revoked := time.Now()
	if f := tb.text(t, ".flash"); !strings.HasPrefix(f, "Key revoked") {
		t.Errorf("after revoking: %q", f)
	}
	within(t, time.Second, "the revoked key is 401 on the other instance", func() bool { return chatCode(t, b, key, "after revoke") == 401 })
	t.Logf("revoked key refused on the other instance %v after the click", time.Since(revoked).Round(time.Millisecond))
	if n := eval[int](t, tb, `document.querySelectorAll("#keys tr[data-key]").length`); n != 0 {
		t.Errorf("%d keys listed after the revoke; want 0", n)
	}
	tb.clean(t, "revoke")

	// The policy: a merge patch applies; a bad one is refused with the
	// admin API's message and changes nothing.
	tb.do(t, "patch", chromedp.SendKeys("#patch", `{"requests_per_minute": 1200, "models": ["gpt-4o-mini"]}`), chromedp.Submit("#patch"))
	tb.poll(t, `document.querySelector(".flash") !== null && document.querySelector(".flash").textContent === "Policy saved."`)
	pol := mustAdmin(t, http.StatusOK, b, "GET", "/admin/tenants/web", "")["policy"].(map[string]any)
	if pol["requests_per_minute"] != float64(1200) || fmt.Sprint(pol["models"]) != "[gpt-4o-mini]" {
		t.Errorf("policy after the console's patch: %v", pol)
	}
	tb.do(t, "bad patch", chromedp.SendKeys("#patch", `{"requests_per_minute": "lots"}`), chromedp.Submit("#patch"))
	tb.poll(t, `document.getElementById("page-error") !== null`)
	if e := tb.text(t, "#page-error"); !strings.Contains(e, "requests_per_minute") {
		t.Errorf("bad patch: %q; want the field named", e)
	}
	tb.expect(t, "status of 400")
	if pol2 := mustAdmin(t, http.StatusOK, a, "GET", "/admin/tenants/web", "")["policy"]; fmt.Sprint(pol2) != fmt.Sprint(pol) {
		t.Errorf("a refused patch changed the policy: %v", pol2)
	}
	tb.do(t, "purge", chromedp.Navigate(a+"/console/tenants/web"), chromedp.WaitVisible("#keys"),
		chromedp.Click(`form[action$="/purge"] button`))
	tb.poll(t, `document.querySelector(".flash") !== null && document.querySelector(".flash").textContent === "Cache purged."`)
	tb.clean(t, "policy and purge")
}

// TestConsoleShowsClientStringsAsText: a key named like markup and a model
// of that name in the tenant's usage are shown as text: no dialog opens
// and no img element exists.
func TestConsoleShowsClientStringsAsText(t *testing.T) {
	base := consoleGateways(t, 1, mockllm.Options{})[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"xss"}`)
	name, _ := json.Marshal(xssText)
	key, _ := newKeyOn(t, base, "xss", `{"name":`+string(name)+`}`)
	req, _ := http.NewRequest(http.MethodPost, base+"/v1/chat/completions", strings.NewReader(`{"model":`+string(name)+`,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+key)
	if resp, body := consoleDo(t, req); resp.StatusCode != 200 {
		t.Fatalf("chat with the markup model: %d %s", resp.StatusCode, body)
	}
	within(t, 5*time.Second, "the request counted", func() bool { return num(t, usageOf(t, base, "xss")["requests"]) == 1 })

	tb := newTab(t)
	tb.signIn(t, base, "adm")
	for _, p := range []string{"/console/tenants/xss", "/console/tenants", "/console/audit", "/console/"} {
		tb.do(t, p, chromedp.Navigate(base+p), chromedp.WaitVisible("h1"))
		if n := eval[int](t, tb, `document.querySelectorAll("img").length`); n != 0 {
			t.Errorf("%s: %d img elements; want none", p, n)
		}
		tb.clean(t, p)
	}
	tb.do(t, "the tenant", chromedp.Navigate(base+"/console/tenants/xss"), chromedp.WaitVisible("#keys"))
	if got := tb.text(t, "#keys td.keyname"); got != xssText {
		t.Errorf("key name shown as %q; want the text %q", got, xssText)
	}
	if got := tb.text(t, "#by-model td.model"); got != xssText {
		t.Errorf("model shown as %q; want the text %q", got, xssText)
	}
	if got := tb.text(t, "#by-day td.model"); got != xssText {
		t.Errorf("model by day shown as %q; want the text %q", got, xssText)
	}
	if n := eval[int](t, tb, `document.querySelectorAll("img").length`); n != 0 {
		t.Errorf("%d img elements; want none", n)
	}
	tb.clean(t, "xss")
}

// consoleSignIn signs in with a plain client, from the console's own
// origin, and returns the session cookie.
func consoleSignIn(t *testing.T, base string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, base+"/console/login", strings.NewReader(url.Values{"token": {"adm"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", base)
	resp, _ := consoleDo(t, req)
	for _, c := range resp.Cookies() {
		if c.Name == "corral_console" {
			return c.Value
		}
	}
	t.Fatalf("sign-in: %d and no cookie", resp.StatusCode)
	return ""
}

// TestConsoleRefusesCrossSitePost: a POST from another site with a valid
// session cookie is 403 and changes nothing; every console response
// carries the CSP and the framing, sniffing and referrer headers; the
// browser reports no error on any page, the Overview's refresh included.
func TestConsoleRefusesCrossSitePost(t *testing.T) {
	base := consoleGateways(t, 1, mockllm.Options{})[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"team"}`)
	_, keyID := newKeyOn(t, base, "team", `{"name":"ci"}`)
	ck := consoleSignIn(t, base)
	evil := func(path, body, origin, referer string) *http.Response {
		req, _ := http.NewRequest(http.MethodPost, base+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: "corral_console", Value: ck})
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		if referer != "" {
			req.Header.Set("Referer", referer)
		}
		resp, out := consoleDo(t, req)
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(out, "did not come from the console") {
			t.Errorf("POST %s from %q/%q: %d; want 403 with its reason", path, origin, referer, resp.StatusCode)
		}
		return resp
	}
	evil("/console/tenants", "id=evil", "http://evil.example", "")
	evil("/console/tenants/team/keys", "name=stolen", "http://evil.example", "")
	evil("/console/tenants/team/keys/"+keyID+"/revoke", "", "", "http://evil.example/page")
	evil("/console/tenants/team/delete", "confirm=yes", "null", "")
	evil("/console/logout", "", "http://evil.example", "")
	evil("/console/login", "token=adm", "http://evil.example", "")
	list := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants", "")
	if n := len(list["tenants"].([]any)); n != 3 {
		t.Errorf("%d tenants after the cross-site POSTs; want 3 (acme, beta, team)", n)
	}
	keys := mustAdmin(t, http.StatusOK, base, "GET", "/admin/tenants/team/keys", "")
	if n := len(keys["keys"].([]any)); n != 1 {
		t.Errorf("team has %d keys after the cross-site POSTs; want 1", n)
	}
	if resp, _ := consoleGet(t, base, "/console/", ck); resp.StatusCode != 200 {
		t.Errorf("the session after a cross-site sign-out: %d; want 200 (still signed in)", resp.StatusCode)
	}

	pages := []string{"/console/", "/console/live", "/console/tenants", "/console/tenants/team", "/console/tenants/acme",
		"/console/upstreams", "/console/audit", "/console/login", "/console/no-such-page", "/console/tenants/nobody"}
	assets := []string{"/console/assets/console.css", "/console/assets/console.js", "/console/assets/favicon.svg"}
	for _, p := range append(pages, assets...) {
		resp, _ := consoleGet(t, base, p, ck)
		h := resp.Header
		csp := h.Get("Content-Security-Policy")
		if !strings.HasPrefix(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("%s (%d): Content-Security-Policy %q", p, resp.StatusCode, csp)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Referrer-Policy") != "same-origin" {
			t.Errorf("%s: X-Frame-Options %q, X-Content-Type-Options %q, Referrer-Policy %q", p, h.Get("X-Frame-Options"), h.Get("X-Content-Type-Options"), h.Get("Referrer-Policy"))
		}
		if !strings.HasPrefix(p, "/console/assets/") && h.Get("Cache-Control") != "no-store" {
			t.Errorf("%s: Cache-Control %q; want no-store", p, h.Get("Cache-Control"))
		}
	}

	tb := newTab(t)
	tb.signIn(t, base, "adm")
	tb.do(t, "refresh the Overview", chromedp.Click("#refresh-now"))
	tb.poll(t, `document.body.getAttribute("data-refreshes") === "1" && document.getElementById("live") !== null`)
	tb.clean(t, "/console/ and its refresh")
	for _, p := range pages[2:7] {
		tb.do(t, p, chromedp.Navigate(base+p), chromedp.WaitVisible("h1"))
		// Every control is labelled: a <label for>, an aria-label, or a
		// button's own text.
		unlabelled := eval[[]string](t, tb, `Array.from(document.querySelectorAll("input, textarea, select, button")).filter(e =>
			!(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !(e.tagName === "BUTTON" && e.textContent.trim())).map(e => e.outerHTML)`)
		if len(unlabelled) != 0 {
			t.Errorf("%s: controls without a label: %v", p, unlabelled)
		}
		tb.clean(t, p)
	}
	// The listener hears the CSP: an inline script the page did not have
	// is blocked and reported.
	eval[bool](t, tb, `(() => { const s = document.createElement("script"); s.textContent = "window.inlineRan = true"; document.body.appendChild(s); return true })()`)
	tb.poll(t, `window.inlineRan === undefined`)
	tb.expect(t, "Content Security Policy")
	tb.clean(t, "after the inline script")
}

// TestConsoleScreenshotsAndNarrowScreen: with CORRAL_SCREENSHOTS=1 the
// Overview and a tenant's page at 1280×800 are written to docs/ for the
// README; always, the Overview and a tenant page at 390 px wide do not
// scroll sideways.
func TestConsoleScreenshotsAndNarrowScreen(t *testing.T) {
	base := consoleGateways(t, 1, mockllm.Options{Latency: 200 * time.Millisecond})[0]
	mustAdmin(t, http.StatusCreated, base, "POST", "/admin/tenants", `{"id":"search","requests_per_minute":1200,"tokens_per_minute":400000,"budget_usd_per_day":25}`)
	key, _ := newKeyOn(t, base, "search", `{"name":"indexer"}`)
	newKeyOn(t, base, "search", `{"name":"ci"}`)
	scriptedLoad(t, base)
	for i := range 8 {
		chatCode(t, base, key, fmt.Sprintf("search query %d", i%4))
	}
	tb := newTab(t)
	tb.do(t, "desktop", chromedp.EmulateViewport(1280, 800))
	tb.signIn(t, base, "adm")
	shots := os.Getenv("CORRAL_SCREENSHOTS") == "1"
	for _, s := range []struct{ path, file string }{{"/console/", "console-overview.png"}, {"/console/tenants/search", "console-tenant.png"}} {
		tb.do(t, s.path, chromedp.Navigate(base+s.path), chromedp.WaitVisible("h1"))
		png, err := chromedp.Run(tb.ctx, chromedp.CaptureScreenshot())
		if err != nil || len(png) < 1000 {
			t.Fatalf("screenshot of %s: %d bytes, %v", s.path, len(png), err)
		}
		if shots {
			if err := os.WriteFile(filepath.Join("..", "..", "docs", s.file), png, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tb.clean(t, s.path)
	}
	tb.do(t, "phone", chromedp.EmulateViewport(390, 844))
	for _, p := range []string{"/console/", "/console/tenants/search", "/console/tenants"} {
		tb.do(t, p, chromedp.Navigate(base+p), chromedp.WaitVisible("h1"))
		if w := eval[int](t, tb, `document.documentElement.scrollWidth`); w > 390 {
			wide := eval[[]string](t, tb, `Array.from(document.querySelectorAll("body *")).filter(e => e.getBoundingClientRect().right > 391 && !(e.parentElement && e.parentElement.closest(".scroll"))).slice(0, 5).map(e => e.tagName + "." + e.className + " " + Math.round(e.getBoundingClientRect().right))`)
			t.Errorf("%s at 390 px: the page is %d px wide; want no sideways scroll (too wide: %v)", p, w, wide)
		}
		tb.clean(t, p+" at 390 px")
	}
}
