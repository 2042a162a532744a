package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	openai "github.com/sashabaranov/go-openai"

	"github.com/corralhq/corral/internal/clocktest"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
)

func limitedTenant(id, key string, rpm, tpm int) tenant.Spec {
	return tenant.Spec{ID: id, KeySHA256: []string{tenant.HashKey(key)}, Policy: tenant.Policy{MaxLeaders: 64, CacheTTL: time.Hour,
		NegativeTTL: time.Minute, Cache: true, RequestsPerMinute: rpm, TokensPerMinute: tpm}}
}

func TestRequestsPerMinuteAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 3, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("rpm30", "sk-rpm30", 30, 0)}
	})
	answers := make([]answer, 90)
	done := make(chan struct{})
	start := make(chan struct{})
	var finished atomic.Int32
	for i := range answers {
		go func() {
			<-start
			// 90 distinct prompts: every one would go upstream if admitted.
			answers[i] = send(context.Background(), h.bases()[i%3], "sk-rpm30", chatBody(fmt.Sprintf("distinct %d", i)))
			if finished.Add(1) == 90 {
				close(done)
			}
		}()
	}
	close(start)
	<-done
	ok, limited := 0, 0
	var retryMS string
	for i, a := range answers {
		if a.header.Get("x-ratelimit-limit-requests") != "30" || a.header.Get("x-ratelimit-remaining-requests") == "" ||
			a.header.Get("x-ratelimit-reset-requests") == "" {
			t.Errorf("answer %d lacks the request headers: %v", i, a.header)
		}
		switch a.status {
		case 200:
			ok++
		case 429:
			limited++
			if !strings.Contains(a.body, `"code":"rate_limit_exceeded"`) || !strings.Contains(a.body, "requests per minute") ||
				a.header.Get("Retry-After") == "" || a.header.Get("Retry-After-Ms") == "" {
				t.Errorf("429 %d: %v %s", i, a.header, a.body)
			}
			retryMS = a.header.Get("Retry-After-Ms")
		default:
			t.Errorf("answer %d: %d %s", i, a.status, a.body)
		}
	}
	if ok != 30 || limited != 60 {
		t.Fatalf("accepted %d, refused %d; want exactly 30 and 60", ok, limited)
	}
	if n := h.mock.Stats().Requests; n != 30 {
		t.Errorf("upstream calls = %d; want 30 (refused requests never go upstream)", n)
	}
	// Another tenant is unaffected.
	if a := send(context.Background(), h.gw.URL, acmeKey, chatBody("other tenant")); a.status != 200 {
		t.Errorf("other tenant: %d", a.status)
	}
	// Waiting as told gets the next request in.
	ms, err := strconv.Atoi(retryMS)
	if err != nil || ms <= 0 || ms > 2100 {
		t.Fatalf("retry-after-ms = %q; want about 2000 for 30/min", retryMS)
	}
	time.Sleep(time.Duration(ms) * time.Millisecond) // the behaviour under test is waiting this long
	if a := send(context.Background(), h.gws[2].URL, "sk-rpm30", chatBody("after waiting")); a.status != 200 {
		t.Errorf("after Retry-After: %d %s", a.status, a.body)
	}
}

func TestTokensPerMinute(t *testing.T) {
	h, _ := distributed(t, 2, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm", "sk-tpm", 0, 2000)}
	})
	body := func(i int) string {
		return fmt.Sprintf(`{"model":"gpt-4o-mini","max_tokens":600,"messages":[{"role":"user","content":"tokens %d"}]}`, i)
	}
	for i := range 3 {
		a := send(context.Background(), h.bases()[i%2], "sk-tpm", body(i))
		if a.status != 200 || a.header.Get("x-ratelimit-limit-tokens") != "2000" {
			t.Fatalf("request %d: %d %v", i, a.status, a.header)
		}
	}
	fourth := send(context.Background(), h.gw.URL, "sk-tpm", body(3))
	if fourth.status != 429 || !strings.Contains(fourth.body, "tokens per minute") || !strings.Contains(fourth.body, `"type":"tokens"`) {
		t.Fatalf("fourth: %d %s; want 429 naming tokens", fourth.status, fourth.body)
	}
	// A cache hit costs no tokens and still passes.
	hit := send(context.Background(), h.gws[1].URL, "sk-tpm", body(0))
	if hit.status != 200 || hit.header.Get("X-Corral-Cache") != cacheHit || hit.header.Get("x-ratelimit-remaining-tokens") == "" {
		t.Errorf("hit: %d %s %v", hit.status, hit.header.Get("X-Corral-Cache"), hit.header)
	}
	if n := h.mock.Stats().Requests; n != 3 {
		t.Errorf("upstream calls = %d; want 3", n)
	}
}

func TestSDKsAndRateLimits(t *testing.T) {
	// The limiter's clock moves only when the test says: on a busy
	// machine the 120 fills took over 500 ms and the refusal below was
	// let through by a refilled request.
	clock := clocktest.New(time.Now())
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("sdk", "sk-sdk", 120, 0)} // one request every 500ms after the burst
	}, withServer(func(so *Options) { so.Limiter = ratelimit.NewMemory(ratelimit.MemoryOptions{Now: clock.Now}) }))
	ctx := context.Background()
	for i := range 120 {
		if a := send(ctx, h.gw.URL, "sk-sdk", chatBody(fmt.Sprintf("fill %d", i))); a.status != 200 {
			t.Fatalf("fill %d: %d", i, a.status)
		}
	}
	// sashabaranov/go-openai surfaces the 429 as an API error with the code.
	cfg := openai.DefaultConfig("sk-sdk")
	cfg.BaseURL = h.gw.URL + "/v1"
	_, err := openai.NewClientWithConfig(cfg).CreateChatCompletion(ctx, chatReq("gpt-4o-mini", "refused"))
	apiErr(t, err, 429, "rate_limit_exceeded")

	// The official SDK retries, honouring retry-after-ms, and succeeds.
	var attempts atomic.Int32
	client := officialopenai.NewClient(
		option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey("sk-sdk"), option.WithMaxRetries(3),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			if attempts.Add(1) > 1 {
				clock.Advance(500 * time.Millisecond) // the wait the 429 asked for, which the SDK slept
			}
			return next(r)
		}))
	resp, err := client.Chat.Completions.New(ctx, officialopenai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []officialopenai.ChatCompletionMessageParamUnion{officialopenai.UserMessage("official sdk")},
	})
	if err != nil {
		t.Fatalf("official SDK: %v", err)
	}
	if resp.Choices[0].Message.Content != "mock reply to: official sdk" {
		t.Errorf("content = %q", resp.Choices[0].Message.Content)
	}
	if attempts.Load() < 2 {
		t.Errorf("attempts = %d; want a 429 then a successful retry", attempts.Load())
	}
}

// TestRequestThatNeverFitsTheTokenBurst: a request whose estimate exceeds
// the tenant's whole tokens/min burst can never be admitted, so its 429
// says so and carries no Retry-After or retry-after-ms: the SDKs would
// otherwise retry it in vain (issue 13, fault 8).
func TestRequestThatNeverFitsTheTokenBurst(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm", "sk-tpm", 0, 1000)}
	})
	body := `{"model":"gpt-4o-mini","max_tokens":5000,"messages":[{"role":"user","content":"too big"}]}`
	for _, hdr := range [][]string{nil, {"Cache-Control", "no-store"}, {"Cache-Control", "no-cache"}} {
		a := send(context.Background(), h.gw.URL, "sk-tpm", body, hdr...)
		if a.status != 429 || !strings.Contains(a.body, "never fit") || !strings.Contains(a.body, `"code":"rate_limit_exceeded"`) {
			t.Errorf("%v: %d %s; want a 429 saying the request can never fit", hdr, a.status, a.body)
		}
		if a.header.Get("Retry-After") != "" || a.header.Get("Retry-After-Ms") != "" {
			t.Errorf("%v: Retry-After %q, retry-after-ms %q; want neither", hdr, a.header.Get("Retry-After"), a.header.Get("Retry-After-Ms"))
		}
		if v := a.header.Get("X-Corral-Cache"); v != "" {
			t.Errorf("%v: a refusal carries X-Corral-Cache %q; want none", hdr, v)
		}
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0", n)
	}
}

// TestTokenEstimateCountsTools: the estimate is the whole body's bytes / 4
// plus the completion, so a request whose bulk is in its tool definitions
// (or images, or tool call arguments) is charged for it and refused at the
// limit like one whose bulk is text (issue 26, point 7).
func TestTokenEstimateCountsTools(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm", "sk-tpm", 0, 1000)}
	})
	tools := `"tools":[{"type":"function","function":{"name":"lookup","description":"` + strings.Repeat("a long description ", 250) + `"}}]`
	body := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}],` + tools + `}`
	a := send(context.Background(), h.gw.URL, "sk-tpm", body)
	if a.status != 429 || !strings.Contains(a.body, "tokens per minute") {
		t.Fatalf("a %d-byte body with two words of text = %d %s; want a 429 for tokens", len(body), a.status, a.body)
	}
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0", n)
	}
	// The same tools in a body that fits are admitted, and charged.
	small := `{"model":"gpt-4o-mini","max_tokens":10,"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"lookup","description":"` + strings.Repeat("d", 3000) + `"}}]}`
	b := send(context.Background(), h.gw.URL, "sk-tpm", small)
	remaining, _ := strconv.Atoi(b.header.Get("x-ratelimit-remaining-tokens"))
	if b.status != 200 || remaining > 1000-len(small)/4 {
		t.Errorf("a body that fits = %d, remaining tokens %d; want 200 and at most %d", b.status, remaining, 1000-len(small)/4)
	}
}
