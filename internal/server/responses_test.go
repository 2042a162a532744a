package server

import (
	"bufio"
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	officialopenai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/objects/objectstest"
	"github.com/corralhq/corral/internal/tenant"
)

// responsesCalls counts the upstream's Responses calls.
func responsesCalls(h *harness) int64 { return h.mock.Stats().Paths["/v1/responses"] }

func respParams(text string) responses.ResponseNewParams {
	return responses.ResponseNewParams{Model: "gpt-4o-mini", Input: responses.ResponseNewParamsInputUnion{OfString: officialopenai.String(text)}}
}

// sdkResponse calls Responses.New through the official SDK and returns the
// answer and its X-Corral-Cache.
func sdkResponse(t *testing.T, base, key string, p responses.ResponseNewParams) (*responses.Response, string) {
	t.Helper()
	c := officialopenai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	var raw *http.Response
	r, err := c.Responses.New(context.Background(), p, option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("Responses.New: %v", err)
	}
	return r, raw.Header.Get("X-Corral-Cache")
}

// sdkStream streams through the official SDK and returns the text the
// deltas add up to, the completed response, the cache status and whether
// the sequence numbers counted up from 0.
func sdkStream(t *testing.T, base, key string, p responses.ResponseNewParams) (string, responses.Response, string) {
	t.Helper()
	c := officialopenai.NewClient(option.WithBaseURL(base+"/v1"), option.WithAPIKey(key), option.WithMaxRetries(0))
	var raw *http.Response
	st := c.Responses.NewStreaming(context.Background(), p, option.WithResponseInto(&raw))
	var text strings.Builder
	var final responses.Response
	n := int64(0)
	for st.Next() {
		ev := st.Current()
		if ev.SequenceNumber != n {
			t.Errorf("event %s: sequence_number %d, want %d", ev.Type, ev.SequenceNumber, n)
		}
		n++
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.Delta)
		case "response.completed":
			final = ev.Response
		}
	}
	if err := st.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return text.String(), final, raw.Header.Get("X-Corral-Cache")
}

func TestResponsesMissThenHit(t *testing.T) {
	h := newHarness(t)
	r1, c1 := sdkResponse(t, h.gw.URL, acmeKey, respParams("hello responses"))
	r2, c2 := sdkResponse(t, h.gw.URL, acmeKey, respParams("hello responses"))
	if c1 != "MISS" || c2 != "HIT" || r1.ID != r2.ID || r2.OutputText() != "mock reply to: hello responses" {
		t.Fatalf("MISS/HIT: %s %s ids %s %s text %q", c1, c2, r1.ID, r2.ID, r2.OutputText())
	}
	// A streaming client gets the stored answer as a stream the SDK reads.
	text, final, c3 := sdkStream(t, h.gw.URL, acmeKey, respParams("hello responses"))
	if c3 != "HIT" || text != r1.OutputText() || final.ID != r1.ID || final.Usage.OutputTokens != r1.Usage.OutputTokens {
		t.Fatalf("streamed HIT: %s %q %s", c3, text, final.ID)
	}
	// A stream that missed serves a later plain request.
	text, final, c4 := sdkStream(t, h.gw.URL, acmeKey, respParams("streamed first"))
	r5, c5 := sdkResponse(t, h.gw.URL, acmeKey, respParams("streamed first"))
	if c4 != "MISS" || c5 != "HIT" || r5.ID != final.ID || r5.OutputText() != text || r5.Usage.InputTokens != final.Usage.InputTokens {
		t.Fatalf("stream then plain: %s %s %q %q", c4, c5, text, r5.OutputText())
	}
	if n := responsesCalls(h); n != 2 {
		t.Errorf("upstream Responses calls = %d; want 2 (one per prompt)", n)
	}
	// store: false is a different answer (no stored object): its own entry.
	p := respParams("hello responses")
	p.Store = officialopenai.Bool(false)
	if _, c := sdkResponse(t, h.gw.URL, acmeKey, p); c != "MISS" {
		t.Errorf("store:false after store:true = %s; want its own MISS", c)
	}
}

func TestResponsesCoalesceAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 3, func(o *harnessOptions) { o.mock.Latency = 150 * time.Millisecond })
	body := `{"model":"gpt-4o-mini","input":"thirty at once"}`
	answers := make([]answer, 30)
	atOnce(len(answers), func(i int) {
		answers[i] = sendTo(context.Background(), h.bases()[i%3]+"/v1/responses", acmeKey, body)
	})
	statuses := map[string]int{}
	for i, a := range answers {
		if a.err != nil || a.status != 200 || a.body != answers[0].body {
			t.Fatalf("answer %d: %v %d %s", i, a.err, a.status, a.body)
		}
		statuses[a.header.Get("X-Corral-Cache")]++
	}
	if n := responsesCalls(h); n != 1 || statuses["MISS"] != 1 {
		t.Errorf("30 identical over 3 instances: %d upstream calls, statuses %v; want 1 call, 1 MISS", n, statuses)
	}
}

func TestResponsesLiveStreamFollowers(t *testing.T) {
	h, _ := distributed(t, 3, func(o *harnessOptions) {
		o.mock.StreamChunks, o.mock.ChunkDelay = 10, 60*time.Millisecond
	})
	body := `{"model":"gpt-4o-mini","input":"twenty live streams of one answer","stream":true}`
	type got struct {
		events      []string
		text        string
		first, last time.Time
		cache       string
		err         error
	}
	results := make([]got, 20)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			req, _ := http.NewRequest(http.MethodPost, h.bases()[i%3]+"/v1/responses", strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+acmeKey)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				results[i].err = err
				return
			}
			defer resp.Body.Close()
			results[i].cache = resp.Header.Get("X-Corral-Cache")
			sc := bufio.NewScanner(resp.Body)
			var text strings.Builder
			for sc.Scan() {
				line := sc.Text()
				if typ, ok := strings.CutPrefix(line, "event: "); ok {
					if results[i].first.IsZero() {
						results[i].first = time.Now()
					}
					results[i].events = append(results[i].events, typ)
					results[i].last = time.Now()
				}
				if d, ok := strings.CutPrefix(line, "data: "); ok && strings.Contains(d, `"response.output_text.delta"`) {
					_, after, _ := strings.Cut(d, `"delta":"`)
					piece, _, _ := strings.Cut(after, `"`)
					text.WriteString(piece)
				}
			}
			results[i].text = text.String()
		}()
	}
	close(start)
	wg.Wait()
	if n := responsesCalls(h); n != 1 {
		t.Fatalf("20 identical streams: %d upstream calls; want 1", n)
	}
	var leaderLast time.Time
	for _, r := range results {
		if r.cache == "MISS" {
			leaderLast = r.last
		}
	}
	for i, r := range results {
		if r.err != nil || len(r.events) == 0 || r.events[0] != "response.created" || r.events[len(r.events)-1] != "response.completed" {
			t.Fatalf("stream %d (%s): %v events %v", i, r.cache, r.err, r.events)
		}
		if r.text != results[0].text || r.text == "" {
			t.Errorf("stream %d text %q; want %q", i, r.text, results[0].text)
		}
		// Followers are live: their first event came while the leader's
		// stream was still running (10 chunks, 60 ms apart).
		if !leaderLast.IsZero() && !r.first.Before(leaderLast) {
			t.Errorf("stream %d (%s) got its first event after the leader's last", i, r.cache)
		}
	}
}

func TestResponsesBypass(t *testing.T) {
	h := newHarness(t)
	if err := h.srv.objects.Assign(context.Background(), "conv_acme", objects.Owner{Tenant: "acme", Upstream: "default", Kind: "conversation"}); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ name, body string }{
		{"background", `{"model":"gpt-4o-mini","input":"bg","background":true}`},
		{"conversation", `{"model":"gpt-4o-mini","input":"conv","conversation":"conv_acme"}`},
		{"hosted tool", `{"model":"gpt-4o-mini","input":"search","tools":[{"type":"web_search"}]}`},
	}
	for _, tt := range tests {
		before := responsesCalls(h)
		for range 2 {
			a := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, tt.body)
			if a.status != 200 || a.header.Get("X-Corral-Cache") != "BYPASS" {
				t.Errorf("%s: %d %s %s", tt.name, a.status, a.header.Get("X-Corral-Cache"), a.body)
			}
		}
		if n := responsesCalls(h) - before; n != 2 {
			t.Errorf("%s: %d upstream calls for 2 requests; want 2", tt.name, n)
		}
	}
	// A function tool is cached.
	fn := `{"model":"gpt-4o-mini","input":"fn","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}]}`
	sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, fn)
	if a := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, fn); a.header.Get("X-Corral-Cache") != "HIT" {
		t.Errorf("function tools: second call %s; want HIT", a.header.Get("X-Corral-Cache"))
	}
}

// TestResponsesCodexRequestsAreCached: what Codex sends on every turn, a
// namespace of function tools and a prompt_cache_key per thread, neither
// bypasses the cache nor splits the key; safety_identifier neither.
func TestResponsesCodexRequestsAreCached(t *testing.T) {
	h := newHarness(t)
	body := func(thread string) string {
		return `{"model":"gpt-4o-mini","input":"list the files","prompt_cache_key":"` + thread + `","safety_identifier":"u-` + thread + `",` +
			`"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},` +
			`{"type":"namespace","name":"mcp__fs","description":"files","tools":[{"type":"function","name":"read_file","parameters":{"type":"object"}}]}]}`
	}
	first := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, body("019a0000-thread-1"))
	second := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, body("019a0000-thread-2"))
	if first.status != 200 || first.header.Get("X-Corral-Cache") != "MISS" || second.header.Get("X-Corral-Cache") != "HIT" {
		t.Errorf("Codex turns: %d %s then %s; want MISS then HIT", first.status, first.header.Get("X-Corral-Cache"), second.header.Get("X-Corral-Cache"))
	}
	if n := responsesCalls(h); n != 1 {
		t.Errorf("upstream Responses calls = %d; want 1", n)
	}
	// A hosted tool inside a namespace still bypasses.
	hosted := `{"model":"gpt-4o-mini","input":"x","tools":[{"type":"namespace","name":"ns","tools":[{"type":"web_search"}]}]}`
	if a := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, hosted); a.header.Get("X-Corral-Cache") != "BYPASS" {
		t.Errorf("hosted tool in a namespace: %s; want BYPASS", a.header.Get("X-Corral-Cache"))
	}
}

func TestResponsesCutStreamStoresNothing(t *testing.T) {
	h := newHarness(t, func(o *harnessOptions) { o.mock.StreamChunks = 4 })
	body := `{"model":"mock-cut","input":"a b c d e f g h","stream":true}`
	a := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, body)
	if !strings.Contains(a.body, "event: error\ndata: {\"type\":\"error\"") || strings.Contains(a.body, "response.completed") {
		t.Fatalf("cut stream = %s", a.body)
	}
	b := sendTo(context.Background(), h.gw.URL+"/v1/responses", acmeKey, strings.Replace(body, `,"stream":true`, "", 1))
	if b.header.Get("X-Corral-Cache") != "MISS" || responsesCalls(h) != 2 {
		t.Errorf("after a cut stream: %s, %d calls; want a MISS (nothing stored)", b.header.Get("X-Corral-Cache"), responsesCalls(h))
	}
}

func TestResponsesTokensPerMinute(t *testing.T) {
	// 300 tokens a minute: a request estimates its body / 4 + 256.
	h := newHarness(t, func(o *harnessOptions) {
		o.tenants = []tenant.Spec{limitedTenant("tpm", "sk-tpm", 0, 300)}
	})
	first := `{"model":"gpt-4o-mini","input":"spend it"}`
	if a := sendTo(context.Background(), h.gw.URL+"/v1/responses", "sk-tpm", first); a.status != 200 {
		t.Fatalf("first call: %d %s", a.status, a.body)
	}
	a := sendTo(context.Background(), h.gw.URL+"/v1/responses", "sk-tpm", `{"model":"gpt-4o-mini","input":"one more"}`)
	if a.status != 429 || !strings.Contains(a.body, "tokens") || a.header.Get("x-ratelimit-limit-tokens") != "300" || a.header.Get("Retry-After") == "" {
		t.Fatalf("over tokens/min: %d %v %s", a.status, a.header, a.body)
	}
	// A hit costs no tokens: served although the bucket is spent.
	if hit := sendTo(context.Background(), h.gw.URL+"/v1/responses", "sk-tpm", first); hit.status != 200 || hit.header.Get("X-Corral-Cache") != "HIT" {
		t.Errorf("a hit with tokens spent: %d %s", hit.status, hit.header.Get("X-Corral-Cache"))
	}
}

// TestResponsesDeletePurgesItsEntry: a stored response served from the
// cache is deleted with its object: after the owner deletes it through
// Corral, the same prompt is a new MISS, never a HIT carrying the deleted
// id.
func TestResponsesDeletePurgesItsEntry(t *testing.T) {
	fake, log := objectstest.New(), &pathLog{}
	h := newHarness(t, objectTenants, withObjectUpstream(fake, log))
	r1, c1 := sdkResponse(t, h.gw.URL, acmeKey, respParams("delete me"))
	r2, c2 := sdkResponse(t, h.gw.URL, acmeKey, respParams("delete me"))
	if c1 != "MISS" || c2 != "HIT" || r2.ID != r1.ID {
		t.Fatalf("before delete: %s %s %s %s", c1, c2, r1.ID, r2.ID)
	}
	c := officialopenai.NewClient(option.WithBaseURL(h.gw.URL+"/v1"), option.WithAPIKey(acmeKey), option.WithMaxRetries(0))
	if err := c.Responses.Delete(context.Background(), r1.ID); err != nil {
		t.Fatal(err)
	}
	r3, c3 := sdkResponse(t, h.gw.URL, acmeKey, respParams("delete me"))
	if c3 != "MISS" || r3.ID == r1.ID {
		t.Errorf("after delete: %s with id %s; want a MISS with a new id", c3, r3.ID)
	}
	if code, _ := objectstest.Call(t, "GET", h.gw.URL+"/v1/responses/"+r3.ID, acmeKey, ""); code != 200 {
		t.Errorf("the new stored response is not the owner's: %d", code)
	}
}
