package server

import (
	"time"

	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/upstream"
)

// ownErrors is every error Corral answers with itself, by the name of its
// variable or constructor, and whether a retry could change it. The
// constructors are called with sample arguments.
var ownErrors = []struct {
	name  string
	give  *apiError
	retry bool
}{
	{"errInvalidAPIKey", errInvalidAPIKey, false},
	{"errInvalidAnthropicKey", errInvalidAnthropicKey, false},
	{"errTooLarge", errTooLarge, false},
	{"errMethodNotAllowed", errMethodNotAllowed, false},
	{"errUnknownPath", errUnknownPath(httptest.NewRequest(http.MethodPost, "/messages", nil)), false},
	{"errClientClosed", errClientClosed, false},
	{"errNoUpstreamForModel", errNoUpstreamForModel, false},
	{"errNotServed", errNotServed, false},
	{"errInternal", errInternal, true},
	{"errUpstreamAuth", errUpstreamAuth, true},
	{"errUpstreamTimeout", errUpstreamTimeout, true},
	{"errUpstream", errUpstream, true},
	{"errStreamBroken", errStreamBroken, true},
	{"errUpstreamTooLarge", errUpstreamTooLarge, true},
	{"errShuttingDown", errShuttingDown, true},
	{"errNoUpstreamAvailable", errNoUpstreamAvailable, true},
	{"errWaitTimeout", errWaitTimeout, true},
	{"errInvalidRequest", errInvalidRequest("bad", "model"), false},
	{"errModelNotAllowed", errModelNotAllowed("gpt-x"), false},
	{"errBadBody", errBadBody(keying.ErrAmbiguousKey), false},
	{"errConcurrency", errConcurrency(2), true},
	{"errUpstreamRateLimited", errUpstreamRateLimited, true},
	{"errNoAnthropicUpstream", errNoAnthropicUpstream, false},
	{"errBatchInputUnread", errBatchInputUnread, true},
	{"errBatchInputUnchecked", errBatchInputUnchecked, false},
	{"errAdminAuth", errAdminAuth, false},
	{"errTooManyAttempts", errTooManyAttempts(time.Minute), true},
	{"errPurgeFailed", errPurgeFailed, true},
	{"errUsageUnavailable", errUsageUnavailable, true},
	{"errUnknownTenant", errUnknownTenant("nobody"), false},
	{"errNoSuchObject", errNoSuchObject("file-x"), false},
	{"errStoredObjectsDisabled", errStoredObjectsDisabled, false},
	{"errOwnershipUnavailable", errOwnershipUnavailable, true},
	{"errCompressedBody", errCompressedBody, false},
	{"errStoredQuery", errStoredQuery("stored_completions"), false},
	{"errNoAnthropicEndpoint", errNoAnthropicEndpoint, false},
	{"errBatchInputTooLarge", errBatchInputTooLarge, false},
	{"errModelNotPriced", errModelNotPriced("gpt-x"), false},
	{"errBudgetExhausted", errBudgetExhausted(&spend.ExhaustedError{Period: spend.Period{Name: "day"}}), false},
	{"errAdminTooLarge", errAdminTooLarge, false},
	// A 409 may be a conflict a retry resolves; the SDKs' own rule for
	// it is to retry, and Corral does not say otherwise.
	{"errManagedByFile", errManagedByFile("acme"), true},
	{"errModelNotFound", errModelNotFound("gpt-x"), false},
	// takeTokens' two 429s, built in place.
	{"rate limited", &apiError{Status: http.StatusTooManyRequests, Type: "tokens", Code: "rate_limit_exceeded", Message: "later"}, true},
	{"never fits", &apiError{Status: http.StatusTooManyRequests, Type: "tokens", Code: "rate_limit_exceeded", Message: "never", neverFits: true}, true},
}

// TestOwnErrorsSayWhetherToRetry renders every error of Corral's own on an
// OpenAI and an Anthropic route: those a retry cannot change carry
// x-should-retry: false, the 429s and 5xx carry none (the SDKs retry those
// on their own rules), and the access line's writer learns the code.
func TestOwnErrorsSayWhetherToRetry(t *testing.T) {
	for _, tt := range ownErrors {
		for _, anthropicPath := range []bool{false, true} {
			rr := httptest.NewRecorder()
			sw := &statusWriter{ResponseWriter: rr, anthropic: anthropicPath}
			// A header left from earlier in the request must not leak
			// onto a retryable error.
			sw.Header().Set("X-Should-Retry", "false")
			writeError(sw, tt.give)
			got := rr.Header().Values("X-Should-Retry")
			want := []string{"false"}
			if tt.retry {
				want = nil
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s (status %d, anthropic %v): x-should-retry %q, want %q", tt.name, tt.give.Status, anthropicPath, got, want)
			}
			if sw.code != tt.give.Code {
				t.Errorf("%s: access line code %q, want %q", tt.name, sw.code, tt.give.Code)
			}
		}
	}
}

// TestRenderedFailuresSayWhetherToRetry: the failures a flight hands its
// waiters on other instances (renderFailure) follow the same rule.
func TestRenderedFailuresSayWhetherToRetry(t *testing.T) {
	tests := []struct {
		give  error
		retry bool
	}{
		{failover.ErrNoRoute, false},
		{&http.MaxBytesError{Limit: 1}, false},
		{coalesce.ErrShutdown, true},
		{&upstream.Error{Kind: upstream.Timeout, Err: errors.New("slow")}, true},
		{coalesce.ErrUpstreamAuth, true},
	}
	for _, tt := range tests {
		e := renderFailure(&coalesce.Request{Format: errorFormat}, tt.give)
		got := http.Header(e.Header).Get("X-Should-Retry")
		if want := map[bool]string{false: "false", true: ""}[tt.retry]; got != want {
			t.Errorf("%v (status %d): x-should-retry %q, want %q", tt.give, e.Status, got, want)
		}
	}
}

// TestEveryOwnErrorIsInTheRetryTable reads the package's sources for every
// error Corral defines (a package variable made by clientError or
// serverError, a function named err... returning *apiError), so a new one
// cannot miss TestOwnErrorsSayWhetherToRetry.
func TestEveryOwnErrorIsInTheRetryTable(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	var defined []string
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil && strings.HasPrefix(d.Name.Name, "err") && returnsAPIError(d.Type) {
					defined = append(defined, d.Name.Name)
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					vs, ok := spec.(*ast.ValueSpec)
					if !ok {
						continue
					}
					for i, id := range vs.Names {
						if i < len(vs.Values) && makesAPIError(vs.Values[i]) {
							defined = append(defined, id.Name)
						}
					}
				}
			}
		}
	}
	if len(defined) < 20 {
		t.Fatalf("found only %d errors (%v): the scan is broken", len(defined), defined)
	}
	for _, name := range defined {
		if !slices.ContainsFunc(ownErrors, func(e struct {
			name  string
			give  *apiError
			retry bool
		}) bool {
			return e.name == name
		}) {
			t.Errorf("%s is not in ownErrors: add it with whether a retry can change it", name)
		}
	}
}

func returnsAPIError(ft *ast.FuncType) bool {
	if ft.Results == nil || len(ft.Results.List) != 1 {
		return false
	}
	star, ok := ft.Results.List[0].Type.(*ast.StarExpr)
	if !ok {
		return false
	}
	id, ok := star.X.(*ast.Ident)
	return ok && id.Name == "apiError"
}

// makesAPIError reports an expression built by clientError or serverError,
// possibly through a method chain (withParam).
func makesAPIError(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "clientError" || fn.Name == "serverError"
	case *ast.SelectorExpr:
		return makesAPIError(fn.X)
	}
	return false
}

// TestAnthropicKeyErrorNamesBothHeaders: the 401 on Anthropic's routes
// tells the user both ways to send the key, as Anthropic's error object.
func TestAnthropicKeyErrorNamesBothHeaders(t *testing.T) {
	h := newHarness(t)
	req, _ := http.NewRequest(http.MethodPost, h.gw.URL+"/v1/messages", strings.NewReader(`{"model":"claude","max_tokens":1,"messages":[]}`))
	req.Header.Set("x-api-key", "sk-wrong")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&e); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 401 || e.Type != "error" || e.Error.Type != "authentication_error" ||
		!strings.Contains(e.Error.Message, "x-api-key") || !strings.Contains(e.Error.Message, "Authorization: Bearer") {
		t.Fatalf("%d %+v", resp.StatusCode, e)
	}
	if got := resp.Header.Get("X-Should-Retry"); got != "false" {
		t.Fatalf("x-should-retry %q", got)
	}
}

// TestWrongKeyIsNotRetriedBySDKs: the real SDKs, allowed five retries,
// make exactly one request for a wrong key, and the 401 they see says no
// retry can help (Claude Code's client retries a 401 without it).
func TestWrongKeyIsNotRetriedBySDKs(t *testing.T) {
	h := newHarness(t, withAnthropic)
	ctx := context.Background()
	type seen struct {
		requests int
		retry    []string
	}
	count := func(s *seen) func(*http.Request, func(*http.Request) (*http.Response, error)) (*http.Response, error) {
		return func(r *http.Request, next func(*http.Request) (*http.Response, error)) (*http.Response, error) {
			s.requests++
			resp, err := next(r)
			if err == nil {
				s.retry = resp.Header.Values("X-Should-Retry")
			}
			return resp, err
		}
	}

	var claude seen
	ac := anthropic.NewClient(aoption.WithBaseURL(h.gw.URL), aoption.WithAPIKey("sk-wrong"), aoption.WithMaxRetries(5),
		aoption.WithMiddleware(func(r *http.Request, next aoption.MiddlewareNext) (*http.Response, error) {
			return count(&claude)(r, next)
		}))
	_, err := ac.Messages.New(ctx, msgParams("wrong key"))
	var aerr *anthropic.Error
	if !errors.As(err, &aerr) || aerr.StatusCode != 401 {
		t.Fatalf("anthropic-sdk-go: %v", err)
	}
	if claude.requests != 1 || !slices.Equal(claude.retry, []string{"false"}) {
		t.Errorf("anthropic-sdk-go: %d requests, x-should-retry %q; want 1 and false", claude.requests, claude.retry)
	}

	var gpt seen
	oc := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey("sk-wrong"), option.WithMaxRetries(5),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) { return count(&gpt)(r, next) }))
	_, err = oc.Chat.Completions.New(ctx, officialopenai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("wrong key")},
	})
	var oerr *officialopenai.Error
	if !errors.As(err, &oerr) || oerr.StatusCode != 401 {
		t.Fatalf("openai-go: %v", err)
	}
	if gpt.requests != 1 || !slices.Equal(gpt.retry, []string{"false"}) {
		t.Errorf("openai-go: %d requests, x-should-retry %q; want 1 and false", gpt.requests, gpt.retry)
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0", n)
	}
}
