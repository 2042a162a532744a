package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/corralhq/corral/internal/testdeps"
)

// The console's browser tests drive Debian's chromium, headless, through
// chromedp: one browser for the whole test binary (started by the first
// test that needs it, closed by TestMain), and a fresh browser context
// (its own cookies) per test.

// shared is the test binary's one browser.
var shared struct {
	once    sync.Once
	ctx     context.Context // the browser's; tabs derive from it
	cancel  context.CancelFunc
	dataDir string
	err     error
}

// chromiumPath is Debian's chromium, or whatever chromium is on PATH.
func chromiumPath() string {
	if _, err := os.Stat("/usr/bin/chromium"); err == nil {
		return "/usr/bin/chromium"
	}
	p, _ := exec.LookPath("chromium")
	return p
}

func startBrowser() {
	path := chromiumPath()
	if path == "" {
		shared.err = fmt.Errorf("chromium is not installed")
		return
	}
	dir, err := os.MkdirTemp("", "corral-chromium-")
	if err != nil {
		shared.err = err
		return
	}
	shared.dataDir = dir
	actx, acancel := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true), chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(dir), chromedp.WindowSize(1280, 800))
	bctx, bcancel := chromedp.NewContext(actx)
	// Start it now, so a browser that cannot start fails here.
	if err := chromedp.Do(bctx); err != nil {
		bcancel()
		acancel()
		shared.err = fmt.Errorf("start chromium: %w", err)
		return
	}
	shared.ctx = bctx
	shared.cancel = func() { bcancel(); acancel() }
}

// closeBrowser ends the shared browser, if one started (TestMain).
func closeBrowser() {
	if shared.cancel != nil {
		shared.cancel()
	}
	if shared.dataDir != "" {
		_ = os.RemoveAll(shared.dataDir)
	}
}

// tab is one page of a browser context of its own, with what the page
// reported: console errors and warnings, exceptions, log entries (CSP
// violations among them) and JavaScript dialogs.
type tab struct {
	ctx context.Context
	mu  sync.Mutex // protects problems and dialogs
	// problems are console errors, exceptions and error log entries.
	problems []string
	dialogs  []string
}

// newTab opens a tab in a new browser context; without chromium the test
// fails under make test and CI=true and is skipped otherwise (testdeps).
func newTab(t *testing.T) *tab {
	t.Helper()
	shared.once.Do(startBrowser)
	if shared.err != nil {
		testdeps.Missing(t, "chromium", fmt.Sprintf(" (%v); the console's browser tests need it", shared.err))
	}
	ctx, cancel := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	t.Cleanup(cancel)
	ctx, cancelT := context.WithTimeout(ctx, 60*time.Second)
	t.Cleanup(cancelT)
	tb := &tab{ctx: ctx}
	if err := chromedp.Listen(ctx, tb.event); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, runtime.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	return tb
}

func (tb *tab) event(ev any) {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	switch e := ev.(type) {
	case *runtime.EventConsoleAPICalled:
		if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeWarning || e.Type == runtime.ConsoleAPICalledTypeAssert {
			var args []string
			for _, a := range e.Args {
				args = append(args, string(a.Value)+a.Description)
			}
			tb.problems = append(tb.problems, "console."+string(e.Type)+": "+strings.Join(args, " "))
		}
	case *runtime.EventExceptionThrown:
		msg := e.ExceptionDetails.Text
		if e.ExceptionDetails.Exception != nil {
			msg += " " + e.ExceptionDetails.Exception.Description
		}
		tb.problems = append(tb.problems, "exception: "+msg)
	case *cdplog.EventEntryAdded:
		if e.Entry.Level == cdplog.EntryLevelError || e.Entry.Level == cdplog.EntryLevelWarning {
			tb.problems = append(tb.problems, "log "+string(e.Entry.Source)+": "+e.Entry.Text+" "+e.Entry.URL)
		}
	case *page.EventJavascriptDialogOpening:
		tb.dialogs = append(tb.dialogs, string(e.Type)+": "+e.Message)
		// Dismiss it, off the event loop, so the page does not hang.
		go func() { _, _ = chromedp.Call(tb.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{}) }()
	}
}

// clean fails the test if the page reported a problem or opened a dialog
// since the last check, naming where.
func (tb *tab) clean(t *testing.T, where string) {
	t.Helper()
	tb.mu.Lock()
	defer tb.mu.Unlock()
	for _, p := range tb.problems {
		t.Errorf("%s: the browser reported %s", where, p)
	}
	for _, d := range tb.dialogs {
		t.Errorf("%s: a JavaScript dialog opened: %s", where, d)
	}
	tb.problems, tb.dialogs = nil, nil
}

// expect waits up to 5 s for a report that contains what (something the
// test caused on purpose) and removes every such report, failing the test
// if none came.
func (tb *tab) expect(t *testing.T, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !tb.drop(what) {
		if time.Now().After(deadline) {
			t.Errorf("the browser did not report %q", what)
			return
		}
		time.Sleep(20 * time.Millisecond) // polling the reports with a deadline
	}
}

// drop removes the reports that contain what and says whether there were
// any.
func (tb *tab) drop(what string) bool {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	kept := tb.problems[:0]
	found := false
	for _, p := range tb.problems {
		if strings.Contains(p, what) {
			found = true
			continue
		}
		kept = append(kept, p)
	}
	tb.problems = kept
	return found
}

// do runs actions in the tab, failing the test on an error.
func (tb *tab) do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tb.ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// text is the text content of the first element sel matches.
func (tb *tab) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(tb.ctx, chromedp.TextContent(sel))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// attr is attribute name of the first element sel matches.
func (tb *tab) attr(t *testing.T, sel, name string) string {
	t.Helper()
	r, err := chromedp.Run(tb.ctx, chromedp.AttributeValue(sel, name))
	if err != nil || !r.Exists {
		t.Fatalf("attribute %s of %s: %v (exists %v)", name, sel, err, r.Exists)
	}
	return r.Value
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, tb *tab, expr string, opts ...chromedp.EvaluateOption) T {
	t.Helper()
	v, err := chromedp.Run(tb.ctx, chromedp.Evaluate[T](expr, opts...))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits, up to 10 s, until the JavaScript expression is true. A
// page in the middle of a navigation (a form just submitted) has no
// context to evaluate in for a moment: polling goes on through that.
func (tb *tab) poll(t *testing.T, expr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, err := chromedp.Run(tb.ctx, chromedp.Evaluate[bool](expr))
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: not within 10s (last error %v)", expr, err)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition with a deadline
	}
}

// signIn signs the tab in to the console at base with token and waits
// for the Overview.
func (tb *tab) signIn(t *testing.T, base, token string) {
	t.Helper()
	tb.do(t, "sign in", chromedp.Navigate(base+"/console/"), chromedp.WaitVisible("#token"),
		chromedp.SendKeys("#token", token), chromedp.Submit("#token"), chromedp.WaitVisible("#live"))
}

// cookie is the tab's console session cookie for base.
func (tb *tab) cookie(t *testing.T, base string) string {
	t.Helper()
	res, err := chromedp.Call(tb.ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{base + "/console/"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range res.Cookies {
		if c.Name == "corral_console" {
			return c.Value
		}
	}
	t.Fatal("no corral_console cookie in the browser")
	return ""
}

// grantClipboard lets the tab's pages at origin read and write the
// clipboard, as a visitor who allowed it would.
func (tb *tab) grantClipboard(t *testing.T, origin string) {
	t.Helper()
	bc := chromedp.FromContext(tb.ctx).BrowserContextID
	for _, name := range []string{"clipboard-read", "clipboard-write"} {
		_, err := chromedp.CallBrowser(tb.ctx, browser.SetPermission, browser.SetPermissionParams{
			Permission: &browser.PermissionDescriptor{Name: name, AllowWithoutSanitization: true}, Setting: browser.PermissionSettingGranted,
			Origin: origin, BrowserContextID: bc})
		if err != nil {
			t.Fatalf("grant %s: %v", name, err)
		}
	}
}

// consoleGet sends GET path to base with the session cookie (none when
// empty) and no redirects followed.
func consoleGet(t *testing.T, base, path, cookie string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+path, nil)
	if cookie != "" {
		req.AddCookie(&http.Cookie{Name: "corral_console", Value: cookie})
	}
	return consoleDo(t, req)
}

var noRedirects = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

func consoleDo(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	return doWith(t, noRedirects, req)
}

// doWith sends req with c and reads the whole answer (the body closed);
// a failed send fails the test.
func doWith(t *testing.T, c *http.Client, req *http.Request) (*http.Response, string) {
	t.Helper()
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return resp, b.String()
}
