package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/mockllm"
)

// sseEvent is one event a test client received, with when it arrived.
type sseEvent struct {
	data string
	at   time.Time
}

// streamClient reads one streaming request's events as they arrive.
type streamClient struct {
	header http.Header
	events chan sseEvent // closed at the end of the stream
	cancel context.CancelFunc
}

func openStream(tb testing.TB, base, key, body string) *streamClient {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := benchClient.Do(req)
	if err != nil {
		cancel()
		tb.Fatal(err)
	}
	c := &streamClient{header: resp.Header, events: make(chan sseEvent, 256), cancel: cancel}
	go readEvents(resp, c)
	tb.Cleanup(cancel)
	return c
}

// readEvents feeds a response's SSE data lines to c.events, then closes it.
func readEvents(resp *http.Response, c *streamClient) {
	defer close(c.events)
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if data, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			c.events <- sseEvent{data: data, at: time.Now()}
		}
	}
}

// contentOf returns the delta content of a chunk, "" for other events.
func contentOf(data string) string {
	var chunk struct {
		Choices []struct {
			Delta struct{ Content string } `json:"delta"`
		} `json:"choices"`
	}
	if json.Unmarshal([]byte(data), &chunk) != nil || len(chunk.Choices) == 0 {
		return ""
	}
	return chunk.Choices[0].Delta.Content
}

// drain reads a stream to its end: its text, the arrival of its first and
// last content chunks, whether it ended with [DONE] and any error event.
type drained struct {
	text        string
	chunks      int
	first, last time.Time
	done        bool
	errEvent    string
}

func drain(c *streamClient) drained {
	var d drained
	for ev := range c.events {
		switch {
		case ev.data == "[DONE]":
			d.done = true
		case strings.Contains(ev.data, `"error"`):
			d.errEvent = ev.data
		default:
			if txt := contentOf(ev.data); txt != "" {
				if d.chunks == 0 {
					d.first = ev.at
				}
				d.last = ev.at
				d.chunks++
				d.text += txt
			}
		}
	}
	return d
}

func slowStream(chunks int, delay time.Duration) func(*harnessOptions) {
	return func(o *harnessOptions) { o.mock.StreamChunks, o.mock.ChunkDelay = chunks, delay }
}

func liveBody(text string) string {
	return `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"` + text + `"}]}`
}

func TestLiveStreamAcrossInstances(t *testing.T) {
	h, _ := distributed(t, 3, slowStream(20, 100*time.Millisecond))
	body := liveBody("one leader, fifty followers, twenty slow chunks")
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	// Followers join once the leader's stream is under way upstream.
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	var followers []*streamClient
	for i := range 49 {
		followers = append(followers, openStream(t, h.bases()[i%3], acmeKey, body))
	}
	lead := drain(leader)
	results := make([]drained, len(followers))
	var wg sync.WaitGroup
	for i, f := range followers {
		wg.Add(1)
		go func() { defer wg.Done(); results[i] = drain(f) }()
	}
	wg.Wait()
	if !lead.done || lead.chunks != 20 || leader.header.Get("X-Corral-Cache") != cacheMiss {
		t.Fatalf("leader: %+v %s", lead, leader.header.Get("X-Corral-Cache"))
	}
	for i, r := range results {
		if r.text != lead.text || !r.done || followers[i].header.Get("X-Corral-Cache") != cacheCoalesced {
			t.Errorf("follower %d on instance %d: %q done=%v %s; want the leader's text, COALESCED",
				i, i%3, r.text, r.done, followers[i].header.Get("X-Corral-Cache"))
		}
		// Live, not after the fact: every follower, on every instance, had
		// its first chunk before the leader's stream was over.
		if !r.first.Before(lead.last) {
			t.Errorf("follower %d got its first chunk at %v, after the leader's last at %v", i, r.first, lead.last)
		}
	}
	if n := h.mock.Stats().Requests; n != 1 {
		t.Errorf("upstream calls = %d; want 1", n)
	}
}

func TestLateFollowerCatchesUpThenFollowsLive(t *testing.T) {
	h, _ := distributed(t, 2, slowStream(20, 60*time.Millisecond))
	body := liveBody("late joiner")
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	var leaderChunks []time.Time
	var follower *streamClient
	for ev := range leader.events {
		if contentOf(ev.data) == "" {
			continue
		}
		leaderChunks = append(leaderChunks, ev.at)
		if len(leaderChunks) == 14 {
			follower = openStream(t, h.gws[1].URL, acmeKey, body) // joins at chunk 15
		}
	}
	if len(leaderChunks) != 20 {
		t.Fatalf("leader got %d chunks", len(leaderChunks))
	}
	var got []time.Time
	text := ""
	for ev := range follower.events {
		if c := contentOf(ev.data); c != "" {
			got = append(got, ev.at)
			text += c
		}
	}
	if len(got) != 20 {
		t.Fatalf("follower got %d chunks; want all 20", len(got))
	}
	// Chunks 1–14 came at once: all before the leader saw chunk 16.
	if got[13].After(leaderChunks[15]) {
		t.Errorf("follower's 14th chunk at %v came after the leader's 16th at %v; want the backlog at once", got[13], leaderChunks[15])
	}
	// Then live: the 20th no earlier than the leader's 20th could exist.
	if got[19].Before(leaderChunks[18]) {
		t.Errorf("follower's last chunk came before the leader's 19th; it cannot have been live")
	}
}

func TestLiveStreamCutEndsEveryFollower(t *testing.T) {
	h, rs := distributed(t, 3, slowStream(20, 30*time.Millisecond))
	body := `{"model":"gpt-4o-mini","stream":true,"mock":{"cut_after":10},"messages":[{"role":"user","content":"cut at ten"}]}`
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	var followers []*streamClient
	for i := range 6 {
		followers = append(followers, openStream(t, h.bases()[i%3], acmeKey, body))
	}
	for i, c := range append([]*streamClient{leader}, followers...) {
		d := drain(c)
		if d.done || !strings.Contains(d.errEvent, `"code":"upstream_error"`) || d.chunks != 10 {
			t.Errorf("client %d: %d chunks, done=%v, error %q; want 10 chunks then an error event", i, d.chunks, d.done, d.errEvent)
		}
	}
	if keys := storedKeys(t, rs, "acme"); len(keys) != 0 {
		t.Errorf("stored %v after a cut stream; want nothing", keys)
	}
	after := drain(openStream(t, h.gws[1].URL, acmeKey, body))
	if n := h.mock.Stats().Requests; n != 2 || after.chunks != 10 {
		t.Errorf("next request: %d upstream calls, %d chunks; want a new upstream call", n, after.chunks)
	}
}

func TestLeaderClientHangsUpMidStream(t *testing.T) {
	h, _ := distributed(t, 2, slowStream(20, 30*time.Millisecond))
	body := liveBody("leader leaves early")
	leader := openStream(t, h.gws[0].URL, acmeKey, body)
	if _, err := h.mock.Wait(context.Background(), func(s mockllm.Stats) bool { return s.InFlight == 1 }); err != nil {
		t.Fatal(err)
	}
	local := openStream(t, h.gws[0].URL, acmeKey, body)
	remote := openStream(t, h.gws[1].URL, acmeKey, body)
	n := 0
	for ev := range leader.events {
		if contentOf(ev.data) != "" {
			if n++; n == 5 {
				leader.cancel() // the leader's own client hangs up at chunk 5
				break
			}
		}
	}
	for name, c := range map[string]*streamClient{"local": local, "remote": remote} {
		if d := drain(c); d.chunks != 20 || !d.done {
			t.Errorf("%s follower: %d chunks done=%v; want all 20", name, d.chunks, d.done)
		}
	}
	if a := send(context.Background(), h.gws[1].URL, acmeKey, chatBody("leader leaves early")); a.header.Get("X-Corral-Cache") != cacheHit {
		t.Errorf("after the stream: %s; want HIT (the entry was stored)", a.header.Get("X-Corral-Cache"))
	}
	if st := h.mock.Stats(); st.Requests != 1 || st.Cancelled != 0 {
		t.Errorf("upstream %+v; want one call, never cancelled", st)
	}
}

func TestDeadLeaderInstanceEndsFollowers(t *testing.T) {
	const lockTTL = 400 * time.Millisecond
	h, rs := distributed(t, 1, func(o *harnessOptions) { o.lockTTL = lockTTL })
	body := liveBody("the leader's instance dies")
	hash := promptHash(t, "acme", body)
	ctx := context.Background()
	rdb := rs.Client()
	// What a leader instance leaves in Redis when it is killed mid-stream:
	// its lock, no longer renewed, and the first events of its stream.
	rdb.Set(ctx, keying.Name("acme", hash, keying.Lock), "dead-instance", lockTTL)
	streamKey := keying.Name("acme", hash, keying.Stream)
	for _, ev := range []string{
		`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n",
		`data: {"id":"x","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"half an "},"finish_reason":null}]}` + "\n\n",
	} {
		rdb.XAdd(ctx, &redis.XAddArgs{Stream: streamKey, Values: []any{"e", ev}})
	}
	d := drain(openStream(t, h.gw.URL, acmeKey, body))
	if d.text != "half an " || d.done || !strings.Contains(d.errEvent, `"code":"upstream_error"`) {
		t.Errorf("follower of a dead leader: %+v; want the events so far, then an error event", d)
	}
	// It ended (drain returned) because the lock lapsed with no end marker.
	if n := h.mock.Stats().Requests; n != 0 {
		t.Errorf("upstream calls = %d; want 0 (it followed the dead leader's stream)", n)
	}
}
