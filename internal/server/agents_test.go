package server

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/mockllm"
)

// The requests in testdata/agents are what the real Codex CLI and Claude
// Code sent to a demo gateway (see testdata/agents/README.md). Each is
// replayed here through a gateway with the mock model as upstream, with
// its own headers: it is forwarded and answered, cached where the design
// caches it, and three at once cost one upstream call.

// agentFixture is one recorded request (cmd/corralagents writes them).
type agentFixture struct {
	Agent   string            `json:"agent"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Headers map[string]string `json:"headers"`
	Body    string            `json:"body"`
}

func loadAgentFixture(t *testing.T, name string) agentFixture {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "agents", name))
	if err != nil {
		t.Fatal(err)
	}
	var f agentFixture
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if f.Method != "POST" {
		t.Fatalf("%s: method %s", name, f.Method)
	}
	return f
}

// send posts the fixture to the gateway at base with its own headers, the
// tenant key where it had a key.
func (f agentFixture) send(ctx context.Context, base, key string) answer {
	var hdr []string
	for k, v := range f.Headers {
		switch strings.ToLower(k) {
		case "authorization":
			v = "Bearer " + key
		case "x-api-key", "api-key":
			v = key
		}
		hdr = append(hdr, k, v)
	}
	return sendWith(ctx, base+f.Path, f.Body, hdr...)
}

// agentCase is what the design promises for one fixture.
type agentCase struct {
	give      string // fixture file
	wantAgain string // X-Corral-Cache of the identical second request
	end       string // the event that ends a complete stream
	coalesced bool   // three at once cost one upstream call (else three)
}

var agentCases = []agentCase{
	// claude -p: cacheable; the identical second is a HIT.
	{give: "claude-1.json", wantAgain: cacheHit, end: "event: message_stop", coalesced: true},
	// The second turn of claude -p with a tool-calling model: its history
	// holds the tool_use and the tool_result.
	{give: "claude-tool-2.json", wantAgain: cacheHit, end: "event: message_stop", coalesced: true},
	// codex exec: its tools include web_search, a hosted tool, so the
	// design never caches or coalesces it (BYPASS).
	{give: "codex-1.json", wantAgain: cacheBypass, end: "event: response.completed"},
	// Codex's second turn: a function_call and its function_call_output.
	{give: "codex-tool-2.json", wantAgain: cacheBypass, end: "event: response.completed"},
}

func TestAgentFixturesForwardedAndCached(t *testing.T) {
	for _, tt := range agentCases {
		t.Run(tt.give, func(t *testing.T) {
			f := loadAgentFixture(t, tt.give)
			h := newHarness(t, withAnthropic)
			first := f.send(t.Context(), h.gw.URL, acmeKey)
			if first.status != 200 || !strings.Contains(first.body, tt.end) {
				t.Fatalf("first: %d %s\n%.600s", first.status, first.header.Get("X-Corral-Cache"), first.body)
			}
			want := cacheMiss
			if tt.wantAgain == cacheBypass {
				want = cacheBypass
			}
			if got := first.header.Get("X-Corral-Cache"); got != want {
				t.Errorf("first: X-Corral-Cache %s; want %s", got, want)
			}
			again := f.send(t.Context(), h.gw.URL, acmeKey)
			if again.status != 200 || again.header.Get("X-Corral-Cache") != tt.wantAgain || !strings.Contains(again.body, tt.end) {
				t.Errorf("again: %d %s; want 200 %s, ending with %s", again.status, again.header.Get("X-Corral-Cache"), tt.wantAgain, tt.end)
			}
		})
	}
}

// TestClaudeCodeSecondRunIsAHit sends the two identical runs of claude -p
// as Claude Code sent them: they differ only in the session id inside
// metadata.user_id, which does not change the answer.
func TestClaudeCodeSecondRunIsAHit(t *testing.T) {
	h := newHarness(t, withAnthropic)
	a := loadAgentFixture(t, "claude-1.json").send(t.Context(), h.gw.URL, acmeKey)
	b := loadAgentFixture(t, "claude-2.json").send(t.Context(), h.gw.URL, acmeKey)
	if a.status != 200 || b.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss || b.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("runs: %d %s, %d %s; want 200 MISS, 200 HIT", a.status, a.header.Get("X-Corral-Cache"), b.status, b.header.Get("X-Corral-Cache"))
	}
}

func TestAgentFixturesThreeAtOnce(t *testing.T) {
	for _, tt := range agentCases {
		t.Run(tt.give, func(t *testing.T) {
			f := loadAgentFixture(t, tt.give)
			gate := make(chan struct{})
			h := newHarness(t, withAnthropic, func(o *harnessOptions) { o.gate = gate })
			answers := make([]answer, 3)
			done := make(chan struct{})
			go func() {
				defer close(done)
				atOnce(3, func(i int) { answers[i] = f.send(context.Background(), h.gw.URL, acmeKey) })
			}()
			// Hold the upstream until all three are in: two followers
			// joined behind one call, or three calls of their own.
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			if tt.coalesced {
				if _, err := h.mock.Wait(ctx, func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
					close(gate)
					<-done
					t.Fatalf("no call in flight: %v; answers %d %d %d", err, answers[0].status, answers[1].status, answers[2].status)
				}
				waitFor(t, func() bool { return h.srv.groupFor("acme").Stats().Joined == 2 })
			} else if _, err := h.mock.Wait(ctx, func(s mockllm.Stats) bool { return s.InFlight == 3 }); err != nil {
				close(gate)
				<-done
				t.Fatalf("three calls never in flight together: %v; answers %d %d %d", err, answers[0].status, answers[1].status, answers[2].status)
			}
			close(gate)
			<-done
			counts := map[string]int{}
			for i, a := range answers {
				if a.status != 200 || !strings.Contains(a.body, tt.end) {
					t.Fatalf("answer %d: %d %s\n%.600s", i, a.status, a.header.Get("X-Corral-Cache"), a.body)
				}
				counts[a.header.Get("X-Corral-Cache")]++
			}
			calls, want := h.mock.Stats().Requests, map[string]int{cacheMiss: 1, cacheCoalesced: 2}
			if !tt.coalesced {
				want = map[string]int{cacheBypass: 3}
			}
			wantCalls := int64(1)
			if !tt.coalesced {
				wantCalls = 3
			}
			if calls != wantCalls {
				t.Errorf("upstream calls = %d; want %d", calls, wantCalls)
			}
			for k, n := range want {
				if counts[k] != n {
					t.Errorf("X-Corral-Cache counts %v; want %v", counts, want)
					break
				}
			}
		})
	}
}

// codexRun is the body of fixture as Codex sends it with web search off
// (no web_search tool), and run a second `codex exec` of the same prompt:
// the same body with fresh client_metadata values, prompt_cache_key and
// input item ids, which is all that differs between two runs.
func codexRun(t *testing.T, fixture string, run int) agentFixture {
	t.Helper()
	f := loadAgentFixture(t, fixture)
	var body map[string]any
	if err := json.Unmarshal([]byte(f.Body), &body); err != nil {
		t.Fatal(err)
	}
	var tools []any
	for _, tl := range body["tools"].([]any) {
		if tl.(map[string]any)["type"] != "web_search" {
			tools = append(tools, tl)
		}
	}
	body["tools"] = tools
	if run > 1 {
		fresh := func(s string) string { return fmt.Sprintf("%s-run%d", s, run) }
		meta := body["client_metadata"].(map[string]any)
		for k, v := range meta {
			meta[k] = fresh(v.(string))
		}
		body["prompt_cache_key"] = fresh(body["prompt_cache_key"].(string))
		for _, it := range body["input"].([]any) {
			item := it.(map[string]any)
			if id, ok := item["id"].(string); ok {
				item["id"] = fresh(id)
			}
		}
	}
	b, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	f.Body = string(b)
	return f
}

// TestCodexSecondRunIsAHit sends two runs of `codex exec` with web search
// off: they differ only in client_metadata (session, thread and turn ids,
// a start time), prompt_cache_key and the ids of unstored input items,
// none of which changes the answer, so the second is a HIT and the
// upstream is called once.
func TestCodexSecondRunIsAHit(t *testing.T) {
	for _, fixture := range []string{"codex-1.json", "codex-tool-2.json"} {
		t.Run(fixture, func(t *testing.T) {
			h := newHarness(t, withAnthropic)
			a := codexRun(t, fixture, 1).send(t.Context(), h.gw.URL, acmeKey)
			b := codexRun(t, fixture, 2).send(t.Context(), h.gw.URL, acmeKey)
			if a.status != 200 || b.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss || b.header.Get("X-Corral-Cache") != cacheHit {
				t.Errorf("runs: %d %s, %d %s; want 200 MISS, 200 HIT", a.status, a.header.Get("X-Corral-Cache"), b.status, b.header.Get("X-Corral-Cache"))
			}
			if !strings.Contains(b.body, "event: response.completed") {
				t.Errorf("second run's stream does not complete:\n%.600s", b.body)
			}
			if calls := h.mock.Stats().Requests; calls != 1 {
				t.Errorf("upstream calls = %d; want 1", calls)
			}
		})
	}
}

// TestCodexStoredItemIDsStayInTheKey: with store true (here the API's
// default, store left out) an input item's id names the item the upstream
// stores, so a fresh id is a new request.
func TestCodexStoredItemIDsStayInTheKey(t *testing.T) {
	h := newHarness(t, withAnthropic)
	stored := func(run int) agentFixture {
		f := codexRun(t, "codex-1.json", run)
		var body map[string]any
		if err := json.Unmarshal([]byte(f.Body), &body); err != nil {
			t.Fatal(err)
		}
		delete(body, "store")
		delete(body, "include") // reasoning.encrypted_content is for unstored requests
		b, _ := json.Marshal(body)
		f.Body = string(b)
		return f
	}
	a := stored(1).send(t.Context(), h.gw.URL, acmeKey)
	b := stored(2).send(t.Context(), h.gw.URL, acmeKey)
	if a.status != 200 || b.status != 200 || a.header.Get("X-Corral-Cache") != cacheMiss || b.header.Get("X-Corral-Cache") != cacheMiss {
		t.Errorf("runs: %d %s, %d %s; want 200 MISS, 200 MISS", a.status, a.header.Get("X-Corral-Cache"), b.status, b.header.Get("X-Corral-Cache"))
	}
}
