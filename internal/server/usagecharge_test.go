package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/spend"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/openai"
	"github.com/corralhq/corral/internal/wire/responses"
)

// figures are the usage objects figuresUpstream answers with, chosen by
// the first word of the prompt. "real" is a call's true usage: 1,000
// input and 5,000 output tokens, $0.00315 at the test catalog's
// gpt-4o-mini prices, far above any of these prompts' estimate.
var figures = map[string]struct{ chat, responses string }{
	"real": {`{"prompt_tokens":1000,"completion_tokens":5000,"total_tokens":6000}`,
		`{"input_tokens":1000,"output_tokens":5000,"total_tokens":6000}`},
	"negative": {`{"prompt_tokens":-1000,"completion_tokens":-5000,"total_tokens":-6000}`,
		`{"input_tokens":-1000,"output_tokens":-5000,"total_tokens":-6000}`},
	"float": {`{"prompt_tokens":1000.5,"completion_tokens":5000.5,"total_tokens":6001}`,
		`{"input_tokens":1000.5,"output_tokens":5000.5,"total_tokens":6001}`},
	"string": {`{"prompt_tokens":"1000","completion_tokens":"5000","total_tokens":"6000"}`,
		`{"input_tokens":"1000","output_tokens":"5000","total_tokens":"6000"}`},
	"huge": {`{"prompt_tokens":9223372036854775807,"completion_tokens":9223372036854775807,"total_tokens":9223372036854775807}`,
		`{"input_tokens":9223372036854775807,"output_tokens":9223372036854775807,"total_tokens":9223372036854775807}`},
	"cached-too-many": {`{"prompt_tokens":10,"completion_tokens":10,"total_tokens":20,"prompt_tokens_details":{"cached_tokens":-4000}}`,
		`{"input_tokens":10,"output_tokens":10,"total_tokens":20,"input_tokens_details":{"cached_tokens":-4000}}`},
}

// realCost is what the "real" figures cost: 1,000 × 150 + 5,000 × 600
// nano-dollars.
const realCost spend.Nanodollars = 3_150_000

// figuresUpstream is a fake OpenAI upstream (chat completions and
// Responses, streamed and not) whose usage figures are set per request by
// the prompt's first word (figures). It reads stream_options as
// encoding/json does, matching keys case-insensitively, as some upstreams
// do: a chat stream carries its usage chunk only when include_usage reads
// true that way. It keeps every chat stream it wrote.
type figuresUpstream struct {
	mu      sync.Mutex // protects streams
	streams []string   // every chat stream body written, in order
}

func (f *figuresUpstream) written() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.streams...)
}

func (f *figuresUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var req struct {
		Model         string `json:"model"`
		Stream        bool   `json:"stream"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
		Input string `json:"input"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		writeAPIError(w, "We could not parse the JSON body of your request.", "null")
		return
	}
	prompt := req.Input
	if len(req.Messages) > 0 {
		prompt = req.Messages[len(req.Messages)-1].Content
	}
	word, _, _ := strings.Cut(prompt, " ")
	fig, ok := figures[word]
	if !ok {
		fig = figures["real"]
	}
	switch r.URL.Path {
	case "/v1/chat/completions":
		head := fmt.Sprintf(`"id":"chatcmpl-fig","object":"chat.completion.chunk","created":1735689600,"model":%q`, req.Model)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-fig","object":"chat.completion","created":1735689600,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":"figures"},"finish_reason":"stop"}],"usage":%s}`, req.Model, fig.chat)
			return
		}
		asked := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		tail := "}"
		if asked {
			tail = `,"usage":null}`
		}
		var b strings.Builder
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"figures\"},\"finish_reason\":null}]%s\n\n", head, tail)
		fmt.Fprintf(&b, "data: {%s,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]%s\n\n", head, tail)
		if asked {
			fmt.Fprintf(&b, "data: {%s,\"choices\":[],\"usage\":%s}\n\n", head, fig.chat)
		}
		b.WriteString("data: [DONE]\n\n")
		f.mu.Lock()
		f.streams = append(f.streams, b.String())
		f.mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, b.String())
	case "/v1/responses":
		resp := fmt.Sprintf(`{"id":"resp_fig","object":"response","created_at":1735689600,"status":"completed","model":%q,"output":[{"type":"message","id":"msg_fig","status":"completed","role":"assistant","content":[{"type":"output_text","text":"figures","annotations":[]}]}],"usage":%s}`, req.Model, fig.responses)
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, resp)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: response.created\ndata: {\"type\":\"response.created\",\"sequence_number\":0,\"response\":{\"id\":\"resp_fig\",\"object\":\"response\",\"created_at\":1735689600,\"status\":\"in_progress\",\"model\":%q,\"output\":[]}}\n\n", req.Model)
		fmt.Fprintf(w, "event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":1,\"response\":%s}\n\n", resp)
	default:
		http.NotFound(w, r)
	}
}

const figuresKey = "sk-figures-test-key"

// withFigures adds tenant "figures" with a day budget of limit (cache
// as cached says) over a figuresUpstream.
func withFigures(fake *figuresUpstream, limit spend.Nanodollars, cached bool) func(*harnessOptions) {
	return func(o *harnessOptions) {
		o.tenants = append(o.tenants, tenant.Spec{ID: "figures", KeySHA256: []string{tenant.HashKey(figuresKey)},
			Policy: tenant.Policy{MaxLeaders: 8, CacheTTL: time.Hour, NegativeTTL: time.Minute, Cache: cached, Budget: spend.Limits{Day: limit}}})
		o.wrapUpstream = func(http.Handler) http.Handler { return fake }
	}
}

// figuresUsage is the tenant's usage as GET /admin/tenants/figures/usage
// reports it, its day budget's spend and reservation.
type figuresUsage struct {
	CostUSD spend.Nanodollars `json:"cost_usd"`
	Budgets []struct {
		SpentUSD    spend.Nanodollars `json:"spent_usd"`
		ReservedUSD spend.Nanodollars `json:"reserved_usd"`
	} `json:"budgets"`
}

// settledUsage reads the figures tenant's usage once no reservation is
// left: a call settles its reservation after its answer is out.
func settledUsage(t *testing.T, h *harness) figuresUsage {
	t.Helper()
	var u figuresUsage
	waitFor(t, func() bool {
		code, body := adminDo(t, h.gw.URL, "GET", "/admin/tenants/figures/usage", adminToken)
		if code != http.StatusOK {
			t.Fatalf("usage: %d %s", code, body)
		}
		u = figuresUsage{}
		if err := json.Unmarshal([]byte(body), &u); err != nil {
			t.Fatal(err)
		}
		return len(u.Budgets) == 1 && u.Budgets[0].ReservedUSD == 0
	})
	return u
}

// postFigures posts body to the figures tenant at path below /v1 and reads
// the answer byte for byte.
func postFigures(ctx context.Context, h *harness, path, body string, hdr ...string) answer {
	return postJSON(ctx, h.gw.URL+"/v1"+path, body, append([]string{"Authorization", "Bearer " + figuresKey}, hdr...), readAll)
}

// TestUncachedStreamsChargedTheirUsage: a BYPASS stream
// (Cache-Control: no-store), a stream of a tenant with cache: false and a
// Responses background stream are each charged the usage their answer
// reports, in the usage API's cost_usd and against the budget, though the
// client did not ask for usage; they were charged only their estimate.
func TestUncachedStreamsChargedTheirUsage(t *testing.T) {
	tests := []struct {
		name   string
		cached bool // the tenant's cache setting
		path   string
		give   string
		header []string
	}{
		{"no-store chat stream", true, "/chat/completions",
			`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"real no-store"}]}`, []string{"Cache-Control", "no-store"}},
		{"cache false tenant's chat stream", false, "/chat/completions",
			`{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"real uncached"}]}`, nil},
		{"Responses background stream", true, "/responses",
			`{"model":"gpt-4o-mini","input":"real background","background":true,"stream":true}`, nil},
		{"Responses background", true, "/responses",
			`{"model":"gpt-4o-mini","input":"real background","background":true}`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fake := &figuresUpstream{}
			h := newHarness(t, withAdmin, withPrices, withFigures(fake, spend.Dollar, tt.cached))
			a := postFigures(context.Background(), h, tt.path, tt.give, tt.header...)
			if a.status != http.StatusOK || a.header.Get("X-Corral-Cache") != cacheBypass {
				t.Fatalf("%d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			u := settledUsage(t, h)
			if u.CostUSD != realCost || u.Budgets[0].SpentUSD != realCost {
				t.Errorf("cost_usd %s, spent %s; want both %s, the answer's usage", u.CostUSD, u.Budgets[0].SpentUSD, realCost)
			}
		})
	}
}

// TestBudgetAdmitsWhatItCanPay: a day budget of three calls' real cost
// admits three BYPASS streams, not the many more their estimates would
// pay for; the fourth is refused and never forwarded. In memory, and
// across two instances sharing a real redis-server's ledger.
func TestBudgetAdmitsWhatItCanPay(t *testing.T) {
	body := `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"real budget"}]}`
	f, err := openai.Format{}.Parse("figures", "/chat/completions", []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, instances := range []int{1, 2} {
		t.Run(fmt.Sprintf("%d instances", instances), func(t *testing.T) {
			fake := &figuresUpstream{}
			opts := []func(*harnessOptions){withAdmin, withPrices, withFigures(fake, 3*realCost, true)}
			var h *harness
			if instances == 1 {
				h = newHarness(t, opts...)
			} else {
				h, _ = distributed(t, instances, opts...)
			}
			if est := h.srv.estimateCost("gpt-4o-mini", f.Estimate); 4*est > realCost {
				t.Fatalf("estimate %s is not below a quarter of the real cost %s: the test could not tell them apart", est, realCost)
			}
			admitted := 0
			for i := range 12 {
				a := postJSON(context.Background(), h.bases()[i%instances]+"/v1/chat/completions", body,
					[]string{"Authorization", "Bearer " + figuresKey, "Cache-Control", "no-store"}, readAll)
				if a.status == http.StatusTooManyRequests {
					break
				}
				if a.status != http.StatusOK {
					t.Fatalf("%d %s", a.status, a.body)
				}
				admitted++
				settledUsage(t, h)
			}
			if n := len(fake.written()); admitted != 3 || n != 3 {
				t.Errorf("admitted %d calls, %d reached the upstream; want 3 and 3", admitted, n)
			}
		})
	}
}

// TestBypassStreamUsageChunkOnlyForWhoAskedForIt: a BYPASS chat stream
// is sent upstream asking for usage; a client that did not ask receives
// the upstream's stream byte for byte without its usage chunk, one that
// asked receives it whole.
func TestBypassStreamUsageChunkOnlyForWhoAskedForIt(t *testing.T) {
	fake := &figuresUpstream{}
	h := newHarness(t, withAdmin, withPrices, withFigures(fake, spend.Dollar, true))
	ctx := context.Background()
	tests := []struct {
		name      string
		give      string
		wantChunk bool
	}{
		{"not asked", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"real a"}]}`, false},
		{"declined", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"real b"}]}`, false},
		{"declined in another case", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"Include_Usage":false},"messages":[{"role":"user","content":"real c"}]}`, false},
		{"asked", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"real d"}]}`, true},
	}
	for i, tt := range tests {
		a := postFigures(ctx, h, "/chat/completions", tt.give, "Cache-Control", "no-store")
		if a.status != http.StatusOK {
			t.Fatalf("%s: %d %s", tt.name, a.status, a.body)
		}
		written := fake.written()
		if len(written) != i+1 {
			t.Fatalf("%s: %d upstream streams; want %d", tt.name, len(written), i+1)
		}
		up := written[i]
		usageChunk := ""
		for ev := range strings.SplitSeq(up, "\n\n") {
			if strings.Contains(ev, `"choices":[]`) {
				usageChunk = ev + "\n\n"
			}
		}
		if usageChunk == "" {
			t.Fatalf("%s: the upstream was not asked for usage: %s", tt.name, up)
		}
		want := strings.Replace(up, usageChunk, "", 1)
		if tt.wantChunk {
			want = up
		}
		if a.body != want {
			t.Errorf("%s: client got\n%s\nwant\n%s", tt.name, a.body, want)
		}
	}
	if u := settledUsage(t, h); u.CostUSD != 4*realCost {
		t.Errorf("cost_usd %s; want %s, four calls' usage", u.CostUSD, 4*realCost)
	}
}

// TestUnreadableUsageChargedTheEstimate: an answer whose usage cannot be
// believed (negative, fractional, strings, beyond wire.MaxTokens, more
// cached than input tokens) is charged its estimate, on the cached path
// and as a BYPASS, streamed and not, for chat completions and the
// Responses API: never a 500, never $0, never a panic; the answer itself
// is relayed as it came.
func TestUnreadableUsageChargedTheEstimate(t *testing.T) {
	type call struct {
		name     string
		path     string
		body     string
		noStore  bool
		estimate int // the body's tokens/min estimate
	}
	var calls []call
	for _, word := range []string{"negative", "float", "string", "huge", "cached-too-many"} {
		for _, noStore := range []bool{false, true} {
			for _, stream := range []bool{false, true} {
				s := ""
				if stream {
					s = `"stream":true,"stream_options":{"include_usage":true},`
				}
				c := call{name: fmt.Sprintf("chat %s stream=%v no-store=%v", word, stream, noStore), path: "/chat/completions", noStore: noStore,
					body: `{"model":"gpt-4o-mini",` + s + `"messages":[{"role":"user","content":"` + word + ` chat"}]}`}
				f, err := openai.Format{}.Parse("figures", "/chat/completions", []byte(c.body))
				if err != nil {
					t.Fatal(err)
				}
				c.estimate = f.Estimate
				calls = append(calls, c)
				if stream {
					s = `"stream":true,`
				}
				r := call{name: fmt.Sprintf("responses %s stream=%v no-store=%v", word, stream, noStore), path: "/responses", noStore: noStore,
					body: `{"model":"gpt-4o-mini",` + s + `"store":false,"input":"` + word + ` responses"}`}
				if f, err = (responses.Format{}).Parse("figures", "/responses", []byte(r.body)); err != nil {
					t.Fatal(err)
				}
				r.estimate = f.Estimate
				calls = append(calls, r)
			}
		}
	}
	// Each case in a harness of its own: one usage API reading per call.
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			fake := &figuresUpstream{}
			h := newHarness(t, withAdmin, withPrices, withFigures(fake, spend.Dollar, true))
			var hdr []string
			if c.noStore {
				hdr = []string{"Cache-Control", "no-store"}
			}
			a := postFigures(context.Background(), h, c.path, c.body, hdr...)
			if a.status != http.StatusOK || !strings.Contains(a.body, "figures") {
				t.Fatalf("%d %s", a.status, a.body)
			}
			est := h.srv.estimateCost("gpt-4o-mini", c.estimate)
			if est <= 0 {
				t.Fatalf("estimate %s", est)
			}
			u := settledUsage(t, h)
			if u.Budgets[0].SpentUSD != est || u.CostUSD != est {
				t.Errorf("spent %s, cost_usd %s; want the estimate, %s", u.Budgets[0].SpentUSD, u.CostUSD, est)
			}
		})
	}
}

// TestDifferentlyCasedIncludeUsageIsOverridden: a cached-path stream whose
// stream_options holds a key that differs only in case from
// include_usage is still sent asking for usage, under every spelling a
// case-insensitive upstream could read, so the call is charged its real
// usage (it was charged $0, its reservation released); the client gets
// the usage chunk only when it asked by OpenAI's name. (A top-level
// Stream_Options is refused with a 400 before anything is sent.)
func TestDifferentlyCasedIncludeUsageIsOverridden(t *testing.T) {
	for i, opts := range []string{
		`"stream_options":{"Include_Usage":false}`,
		`"stream_options":{"INCLUDE_USAGE":null,"include_obfuscation":false}`,
		`"stream_options":{"include_usage":false,"Include_Usage":false}`,
		`"stream_options":{"include_usage":true,"INCLUDE_USAGE":false}`,
	} {
		t.Run(opts, func(t *testing.T) {
			fake := &figuresUpstream{}
			h := newHarness(t, withAdmin, withPrices, withFigures(fake, spend.Dollar, true))
			body := fmt.Sprintf(`{"model":"gpt-4o-mini","stream":true,%s,"messages":[{"role":"user","content":"real %d"}]}`, opts, i)
			a := postFigures(context.Background(), h, "/chat/completions", body)
			if a.status != http.StatusOK || a.header.Get("X-Corral-Cache") != "MISS" {
				t.Fatalf("%d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			if u := settledUsage(t, h); u.CostUSD != realCost || u.Budgets[0].SpentUSD != realCost {
				t.Errorf("cost_usd %s, spent %s; want %s", u.CostUSD, u.Budgets[0].SpentUSD, realCost)
			}
			asked := strings.Contains(opts, `"include_usage":true`)
			if got := strings.Contains(a.body, `"choices":[]`); got != asked {
				t.Errorf("usage chunk relayed: %v; want %v:\n%s", got, asked, a.body)
			}
		})
	}
}

// TestMessagesBypassChargedItsUsage: a Messages BYPASS, streamed and not,
// is charged the usage its answer carries (message_start and
// message_delta in a stream), against the budget and in cost_usd.
func TestMessagesBypassChargedItsUsage(t *testing.T) {
	// 50 input × 3,000 + 2,000 cache reads × 300 + 1,000 cache writes ×
	// 3,750 + 300 output × 15,000 nano-dollars (pricedUpstream's usage at
	// the test catalog's claude-sonnet-4* prices).
	const want spend.Nanodollars = 9_000_000
	for _, stream := range []bool{false, true} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			var calls atomic.Int64
			h := newHarness(t, withAnthropic, withAdmin, withPrices, withCapped(spend.Dollar, &calls))
			body := fmt.Sprintf(`{"model":"claude-sonnet-4-5","max_tokens":64,"stream":%v,"messages":[{"role":"user","content":"bypassed"}]}`, stream)
			a := postMessages(context.Background(), h.gw.URL+"/v1/messages", cappedKey, body, "Anthropic-Version", "2023-06-01", "Cache-Control", "no-store")
			if a.status != http.StatusOK || a.header.Get("X-Corral-Cache") != cacheBypass {
				t.Fatalf("%d %s %s", a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
			var u figuresUsage
			waitFor(t, func() bool {
				_, raw := adminDo(t, h.gw.URL, "GET", "/admin/tenants/capped/usage", adminToken)
				u = figuresUsage{}
				return json.Unmarshal([]byte(raw), &u) == nil && len(u.Budgets) == 1 && u.Budgets[0].ReservedUSD == 0
			})
			if u.CostUSD != want || u.Budgets[0].SpentUSD != want || calls.Load() != 1 {
				t.Errorf("cost_usd %s, spent %s after %d calls; want %s, one call", u.CostUSD, u.Budgets[0].SpentUSD, calls.Load(), want)
			}
		})
	}
}

// TestUsageBoundIsThePriceBound: the largest usage figure Corral believes
// is the largest count a cost is computed within, so a believed figure is
// never clamped when it is priced.
func TestUsageBoundIsThePriceBound(t *testing.T) {
	if wire.MaxTokens != spend.MaxTokens {
		t.Errorf("wire.MaxTokens = %d, spend.MaxTokens = %d; want them equal", wire.MaxTokens, spend.MaxTokens)
	}
}
