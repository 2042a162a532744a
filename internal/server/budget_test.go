package server

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
)

const cappedKey = "sk-capped-test-key"

// withCapped adds tenant "capped" with a day budget of limit, over the
// priced upstream, counting the calls that reach it in calls.
func withCapped(limit spend.Nanodollars, calls *atomic.Int64) func(*harnessOptions) {
	return func(o *harnessOptions) {
		o.tenants = append(o.tenants, tenant.Spec{ID: "capped", KeySHA256: []string{tenant.HashKey(cappedKey)},
			Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: true, Budget: spend.Limits{Day: limit}}})
		o.wrapUpstream = func(next http.Handler) http.Handler {
			up := pricedUpstream(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				up.ServeHTTP(w, r)
			})
		}
	}
}

func cappedChat(text string) string {
	return `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"` + text + `"}]}`
}

// TestBudgetRefusesAtTheLimit: a tenant with a day budget of exactly one
// chat call's cost ($0.00024) gets that call, then refusals in the
// design's shapes that reach no upstream; its cached prompt is still a
// HIT; every answer carries x-corral-budget-remaining-usd.
func TestBudgetRefusesAtTheLimit(t *testing.T) {
	var calls atomic.Int64
	h := newHarness(t, withAnthropic, withPrices, withCapped(240_000, &calls))
	ctx := context.Background()
	first := send(ctx, h.gw.URL, cappedKey, cappedChat("first"))
	if first.status != 200 || first.header.Get("X-Corral-Cache") != "MISS" || first.header.Get(budgetHeader) != "0.00024" {
		t.Fatalf("first call: %d %v %s", first.status, first.header, first.body)
	}
	refused := send(ctx, h.gw.URL, cappedKey, cappedChat("second"))
	if refused.status != http.StatusTooManyRequests || refused.header.Get("X-Should-Retry") != "false" ||
		refused.header.Get("Retry-After") != "" || refused.header.Get("Retry-After-Ms") != "" || refused.header.Get("X-Corral-Cache") != "" {
		t.Fatalf("over budget: %d %v; want 429, x-should-retry: false, no Retry-After, no X-Corral-Cache", refused.status, refused.header)
	}
	const wantBody = `{"error":{"message":"Budget exhausted: this key's day budget of $0.00024 is used up ($0.00024 spent, $0.00 reserved by calls in progress); it resets at `
	if !strings.HasPrefix(refused.body, wantBody) || !strings.Contains(refused.body, `","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`) {
		t.Errorf("body = %s", refused.body)
	}
	// On Messages: 400 invalid_request_error, the same message.
	m := postMessages(ctx, h.gw.URL+"/v1/messages", cappedKey, `{"model":"claude-sonnet-4-5","max_tokens":64,"messages":[{"role":"user","content":"over"}]}`, "Anthropic-Version", "2023-06-01")
	if m.status != http.StatusBadRequest || m.header.Get("X-Should-Retry") != "false" || m.header.Get("X-Corral-Cache") != "" ||
		!strings.Contains(m.body, `"type":"invalid_request_error","message":"Budget exhausted: `) {
		t.Errorf("Messages over budget: %d %v %s", m.status, m.header, m.body)
	}
	// The cached prompt still serves, at no cost.
	hit := send(ctx, h.gw.URL, cappedKey, cappedChat("first"))
	if hit.status != 200 || hit.header.Get("X-Corral-Cache") != "HIT" || hit.header.Get(budgetHeader) != "0" {
		t.Errorf("hit over budget: %d %v", hit.status, hit.header)
	}
	// Unpriced models and unmetered endpoints are refused, never forwarded.
	np := send(ctx, h.gw.URL, cappedKey, `{"model":"llama-3","messages":[{"role":"user","content":"x"}]}`)
	if np.status != http.StatusForbidden || !strings.Contains(np.body, `"code":"model_not_priced"`) || np.header.Get("X-Should-Retry") != "false" {
		t.Errorf("unpriced model: %d %s", np.status, np.body)
	}
	img := sendWith(ctx, h.gw.URL+"/v1/images/generations", `{"model":"gpt-image-1","prompt":"a cat"}`, "Authorization", "Bearer "+cappedKey)
	if img.status != http.StatusForbidden || !strings.Contains(img.body, `"code":"budget_unmetered_endpoint"`) {
		t.Errorf("images: %d %s", img.status, img.body)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("upstream calls = %d; want 1 (refusals never forwarded)", n)
	}
	// Another tenant is not limited.
	if a := send(ctx, h.gw.URL, acmeKey, cappedChat("second")); a.status != 200 || a.header.Get(budgetHeader) != "" {
		t.Errorf("unbudgeted tenant: %d %v", a.status, a.header)
	}
}

// TestBudgetRefusalSDKsMakeOneRequest: each SDK surfaces the refusal as its
// quota error and does not retry it.
func TestBudgetRefusalSDKsMakeOneRequest(t *testing.T) {
	var calls atomic.Int64
	h := newHarness(t, withAnthropic, withPrices, withCapped(1, &calls))
	ctx := context.Background()
	if a := send(ctx, h.gw.URL, cappedKey, cappedChat("spend it")); a.status != 200 {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	var attempts atomic.Int32
	counting := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}

	// openai-go, with its default retries.
	oc := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(cappedKey), option.WithHTTPClient(counting))
	_, err := oc.Chat.Completions.New(ctx, officialopenai.ChatCompletionNewParams{Model: "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("openai-go")}})
	var oe *officialopenai.Error
	if !errors.As(err, &oe) || oe.StatusCode != 429 || oe.Code != "insufficient_quota" || attempts.Load() != 1 {
		t.Errorf("openai-go: %v after %d requests; want one 429 insufficient_quota", err, attempts.Load())
	}

	attempts.Store(0)
	cfg := openai.DefaultConfig(cappedKey)
	cfg.BaseURL, cfg.HTTPClient = h.gw.URL+"/v1", counting
	_, err = openai.NewClientWithConfig(cfg).CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "go-openai"))
	var ge *openai.APIError
	if !errors.As(err, &ge) || ge.HTTPStatusCode != 429 || ge.Code != "insufficient_quota" || attempts.Load() != 1 {
		t.Errorf("go-openai: %v after %d requests; want one 429 insufficient_quota", err, attempts.Load())
	}

	attempts.Store(0)
	ac := anthropic.NewClient(aoption.WithBaseURL(h.gw.URL), aoption.WithAPIKey(cappedKey), aoption.WithHTTPClient(counting))
	_, err = ac.Messages.New(ctx, msgParams("anthropic-sdk-go"))
	var ae *anthropic.Error
	if !errors.As(err, &ae) || ae.StatusCode != 400 || attempts.Load() != 1 {
		t.Errorf("anthropic-sdk-go: %v after %d requests; want one 400", err, attempts.Load())
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestBudgetHoldsAcrossInstances: 3 instances on one redis-server, a tenant
// with a $0.01 day budget, 300 distinct prompts at once, spread over the
// instances. Each call costs $0.00024 and reserves its estimate first (body
// bytes / 4 + max_tokens, at the output price: at least its cost). A call
// is admitted only while spent + reserved < $0.01, and every admitted call
// is covered by its reservation, so the budget is overrun by at most the
// last admitted call: spent ≤ $0.01 + one call's estimate; and it falls
// short of it by at most what the calls in flight at the refusal had
// reserved over their cost. Every refusal is
// 429 insufficient_quota with x-should-retry: false, and only admitted
// calls reach the upstream.
func TestBudgetHoldsAcrossInstances(t *testing.T) {
	var calls atomic.Int64
	h, rs := distributed(t, 3, withPrices, withCapped(spend.Cent, &calls))
	ctx := context.Background()
	const n = 300
	body := func(i int) string {
		return `{"model":"gpt-4o-mini","max_tokens":400,"messages":[{"role":"user","content":"distinct prompt ` + strconv.Itoa(i) + `"}]}`
	}
	estimate := h.srv.estimateCost("gpt-4o-mini", len(body(100))/4+400)
	if estimate < 240_000 {
		t.Fatalf("estimate %s is below a call's cost: the bound below would not hold", estimate)
	}
	answers := make([]answer, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			answers[i] = send(ctx, h.bases()[i%3], cappedKey, body(i))
		}()
	}
	close(start)
	wg.Wait()
	var ok, refused int
	for i, a := range answers {
		switch {
		case a.status == 200:
			ok++
		case a.status == http.StatusTooManyRequests && strings.Contains(a.body, `"code":"insufficient_quota"`) &&
			a.header.Get("X-Should-Retry") == "false" && a.header.Get("Retry-After") == "" && a.header.Get("X-Corral-Cache") == "":
			refused++
		default:
			t.Errorf("request %d: %d %v %s", i, a.status, a.header, a.body)
		}
	}
	st, err := spend.NewRedisLedger(rs.Client(), spend.LedgerOptions{}).Read(ctx, "capped", spend.Limits{Day: spend.Cent})
	if err != nil {
		t.Fatal(err)
	}
	spent := st[0].Spent
	t.Logf("%d answered, %d refused, spent %s of %s (estimate %s)", ok, refused, spent, spend.Cent, estimate)
	if got := calls.Load(); got != int64(ok) {
		t.Errorf("upstream calls = %d; want %d, the answered requests only", got, ok)
	}
	if spent != spend.Nanodollars(ok)*240_000 || st[0].Reserved != 0 {
		t.Errorf("spent %s reserved %s; want %d calls × $0.00024 and nothing reserved", spent, st[0].Reserved, ok)
	}
	if spent > spend.Cent+estimate {
		t.Errorf("spent %s; want at most the budget plus one call's estimate, %s", spent, spend.Cent+estimate)
	}
	// The lower bound: a call is refused once spent plus reserved has
	// reached the budget, and the calls in flight then reserved their
	// estimate where they spend $0.00024, so what they settle can leave the
	// budget short by at most the answered calls' over-reservation.
	if slack := spend.Nanodollars(ok) * (estimate - 240_000); spent+slack < spend.Cent || refused == 0 {
		t.Errorf("spent %s (+ %s over-reserved) with %d refusals; want the budget reached and the rest refused", spent, slack, refused)
	}
}

// TestBudgetServesCoalescedFollowers: followers of a call admitted before
// the budget ran out get its answer (COALESCED, with what it saved them),
// although the call spends the whole budget; a new prompt is then refused.
func TestBudgetServesCoalescedFollowers(t *testing.T) {
	var calls atomic.Int64
	gate := make(chan struct{})
	h := newHarness(t, withPrices, withCapped(240_000, &calls), func(o *harnessOptions) {
		inner := o.wrapUpstream
		o.wrapUpstream = func(next http.Handler) http.Handler {
			up := inner(next)
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				<-gate
				up.ServeHTTP(w, r)
			})
		}
	})
	ctx := context.Background()
	answers := make(chan answer, 3)
	for range 3 {
		go func() { answers <- send(ctx, h.gw.URL, cappedKey, cappedChat("shared")) }()
	}
	waitFor(t, func() bool { return h.srv.groupFor("capped").Stats().Joined == 2 })
	close(gate)
	got := map[string]int{}
	for range 3 {
		a := <-answers
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		got[a.header.Get("X-Corral-Cache")]++
	}
	if got["MISS"] != 1 || got["COALESCED"] != 2 || calls.Load() != 1 {
		t.Errorf("answers %v after %d upstream calls; want 1 MISS, 2 COALESCED, 1 call", got, calls.Load())
	}
	if a := send(ctx, h.gw.URL, cappedKey, cappedChat("new")); a.status != http.StatusTooManyRequests {
		t.Errorf("a new prompt over budget: %d; want 429", a.status)
	}
}

// TestBypassChargedItsActualCost: a no-store call (a BYPASS) is charged
// the cost of the usage its answer reports, read as the answer is relayed,
// not its reservation's estimate; streamed and not.
func TestBypassChargedItsActualCost(t *testing.T) {
	var calls atomic.Int64
	h, rs := distributed(t, 1, withPrices, withCapped(1_000_000_000, &calls))
	ctx := context.Background()
	ledger := spend.NewRedisLedger(rs.Client(), spend.LedgerOptions{})
	var want spend.Nanodollars
	for _, body := range []string{
		`{"model":"gpt-4o-mini","max_tokens":50,"messages":[{"role":"user","content":"bypassed"}]}`,
		`{"model":"gpt-4o-mini","max_tokens":50,"stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"bypassed"}]}`,
	} {
		if est := h.srv.estimateCost("gpt-4o-mini", len(body)/4+50); est == 240_000 {
			t.Fatalf("estimate %s equals the actual cost: the test could not tell them apart", est)
		}
		a := send(ctx, h.gw.URL, cappedKey, body, "Cache-Control", "no-store")
		if a.status != 200 || a.header.Get("X-Corral-Cache") != "BYPASS" {
			t.Fatalf("no-store call: %d %v %s", a.status, a.header, a.body)
		}
		// 1000 input tokens (400 cached) and 200 output at the test
		// catalog's gpt-4o-mini prices: $0.00024 a call.
		want += 240_000
		var st spend.Standing
		deadline := time.Now().Add(5 * time.Second)
		for {
			var err error
			if st, err = ledger.Read(ctx, "capped", spend.Limits{Day: 1_000_000_000}); err != nil {
				t.Fatal(err)
			}
			if st[0].Reserved == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling for the settle after the answer, with a deadline
		}
		if st[0].Spent != want || st[0].Reserved != 0 {
			t.Errorf("after %s: spent %s reserved %s; want %s spent, nothing reserved", body, st[0].Spent, st[0].Reserved, want)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("upstream calls = %d; want 2", n)
	}
}

// TestBudgetHeaderShowsTheCostAfterAMiss: once a MISS has settled, the
// next answers' x-corral-budget-remaining-usd deducts what it cost, not
// what it reserved, on one instance and on several.
func TestBudgetHeaderShowsTheCostAfterAMiss(t *testing.T) {
	check := func(t *testing.T, bases []string) {
		ctx := context.Background()
		miss := send(ctx, bases[0], cappedKey, cappedChat("priced once"))
		if miss.status != 200 || miss.header.Get("X-Corral-Cache") != "MISS" || miss.header.Get(budgetHeader) != "0.01" {
			t.Fatalf("miss: %d %v %s", miss.status, miss.header, miss.body)
		}
		// $0.01 less the call's cost, $0.00024 (its estimate was more).
		hit := send(ctx, bases[0], cappedKey, cappedChat("priced once"))
		if hit.status != 200 || hit.header.Get("X-Corral-Cache") != "HIT" || hit.header.Get(budgetHeader) != "0.00976" {
			t.Errorf("hit after the miss: %d %s %q; want HIT with 0.00976 left", hit.status, hit.header.Get("X-Corral-Cache"), hit.header.Get(budgetHeader))
		}
	}
	t.Run("embedded", func(t *testing.T) {
		var calls atomic.Int64
		h := newHarness(t, withPrices, withCapped(spend.Cent, &calls))
		check(t, []string{h.gw.URL})
	})
	t.Run("distributed", func(t *testing.T) {
		var calls atomic.Int64
		h, _ := distributed(t, 2, withPrices, withCapped(spend.Cent, &calls))
		check(t, h.bases())
	})
}
