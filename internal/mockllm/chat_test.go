package mockllm_test

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/mockllm"
)

func TestChat(t *testing.T) {
	tests := []struct {
		name        string
		give        string
		wantContent string
		wantChoices int
		wantPrompt  int
	}{
		{
			name:        "string content",
			give:        `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello there"}]}`,
			wantContent: "mock reply to: hello there",
			wantChoices: 1,
			wantPrompt:  4,
		},
		{
			name:        "last user message wins",
			give:        `{"model":"gpt-4o","messages":[{"role":"user","content":"one"},{"role":"assistant","content":"two"},{"role":"user","content":"three"}]}`,
			wantContent: "mock reply to: three",
			wantChoices: 1,
			wantPrompt:  3,
		},
		{
			name:        "content parts",
			give:        `{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"look at"},{"type":"image_url","image_url":{"url":"data:x"}},{"type":"text","text":"this"}]}]}`,
			wantContent: "mock reply to: look at this",
			wantChoices: 1,
			wantPrompt:  3,
		},
		{
			name:        "null content and n",
			give:        `{"model":"gpt-4o","n":3,"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}]}`,
			wantContent: "mock reply to: hi",
			wantChoices: 3,
			wantPrompt:  1,
		},
		{
			name:        "no user text counts one prompt token",
			give:        `{"model":"gpt-4o","messages":[{"role":"system","content":""}]}`,
			wantContent: "mock reply to: ",
			wantChoices: 1,
			wantPrompt:  1,
		},
	}
	_, ts := startServer(t, mockllm.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, h, body := post(t, ts, "/v1/chat/completions", tt.give)
			if status != 200 {
				t.Fatalf("status = %d, want 200; body %s", status, body)
			}
			if got := h.Get("Content-Type"); got != "application/json" {
				t.Errorf("Content-Type = %q, want application/json", got)
			}
			c := decode[chatCompletion](t, body)
			var req struct {
				Model string `json:"model"`
			}
			_ = json.Unmarshal([]byte(tt.give), &req)
			if !strings.HasPrefix(c.ID, "chatcmpl-") || c.Object != "chat.completion" || c.Model != req.Model || c.Created == 0 {
				t.Errorf("id, object, model, created = %q, %q, %q, %d; want chatcmpl-…, chat.completion, %q, non-zero",
					c.ID, c.Object, c.Model, c.Created, req.Model)
			}
			if len(c.Choices) != tt.wantChoices {
				t.Fatalf("got %d choices, want %d", len(c.Choices), tt.wantChoices)
			}
			for i, ch := range c.Choices {
				if ch.Index != i || ch.Message.Role != "assistant" || ch.Message.Content != tt.wantContent || ch.FinishReason != "stop" {
					t.Errorf("choice %d = %+v, want index %d, assistant, %q, stop", i, ch, i, tt.wantContent)
				}
			}
			wantCompletion := len(strings.Fields(tt.wantContent)) * tt.wantChoices
			want := usage{tt.wantPrompt, wantCompletion, tt.wantPrompt + wantCompletion}
			if c.Usage != want {
				t.Errorf("usage = %+v, want %+v", c.Usage, want)
			}

			// Deterministic: the same body gets the same bytes.
			_, _, again := post(t, ts, "/v1/chat/completions", tt.give)
			if string(again) != string(body) {
				t.Errorf("second answer differs:\n got %s\nwant %s", again, body)
			}
		})
	}
}

func TestChatIDDependsOnBody(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	_, _, a := post(t, ts, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"a"}]}`)
	_, _, b := post(t, ts, "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"b"}]}`)
	if ida, idb := decode[chatCompletion](t, a).ID, decode[chatCompletion](t, b).ID; ida == idb {
		t.Errorf("two bodies got the same id %q", ida)
	}
}

// streamResult is a parsed stream, checked against the mock's contract.
type streamResult struct {
	id        string   // shared by every chunk
	content   []string // concatenated content per choice
	contents  int      // content chunks
	finishes  int      // chunks with finish_reason "stop"
	usage     *usage
	done      bool
	usageNull bool // every chunk before the usage chunk had "usage": null
}

// parseStream checks the invariants every stream has (one id, created and
// model, role first, finish before usage, [DONE] last) and returns the rest.
func parseStream(t *testing.T, events []string, chat bool) streamResult {
	t.Helper()
	var r streamResult
	var first chunk
	r.usageNull = true
	for i, ev := range events {
		if ev == "[DONE]" {
			if i != len(events)-1 {
				t.Errorf("[DONE] is event %d of %d", i, len(events))
			}
			r.done = true
			continue
		}
		var c chunk
		if err := json.Unmarshal([]byte(ev), &c); err != nil {
			t.Fatalf("event %d: %v: %s", i, err, ev)
		}
		var raw map[string]json.RawMessage
		_ = json.Unmarshal([]byte(ev), &raw)
		if i == 0 {
			first = c
			r.id = c.ID
		}
		if c.ID != first.ID || c.Created != first.Created || c.Model != first.Model || c.Object != first.Object {
			t.Errorf("event %d id/created/model/object = %s %d %s %s, first was %s %d %s %s",
				i, c.ID, c.Created, c.Model, c.Object, first.ID, first.Created, first.Model, first.Object)
		}
		wantObject := "text_completion"
		if chat {
			wantObject = "chat.completion.chunk"
		}
		if c.Object != wantObject {
			t.Errorf("event %d object = %q, want %q", i, c.Object, wantObject)
		}
		if c.Usage != nil {
			if len(c.Choices) != 0 {
				t.Errorf("usage chunk has %d choices, want 0", len(c.Choices))
			}
			r.usage = c.Usage
			continue
		}
		if u, ok := raw["usage"]; !ok || string(u) != "null" {
			r.usageNull = false
		}
		if len(c.Choices) != 1 {
			t.Fatalf("event %d has %d choices, want 1", i, len(c.Choices))
		}
		ch := c.Choices[0]
		for len(r.content) <= ch.Index {
			r.content = append(r.content, "")
		}
		switch {
		case ch.FinishReason != nil:
			if *ch.FinishReason != "stop" {
				t.Errorf("finish_reason = %q, want stop", *ch.FinishReason)
			}
			if ch.Delta.Content != nil || ch.Text != "" {
				t.Errorf("final chunk carries content")
			}
			r.finishes++
		case chat && ch.Delta.Role != "":
			if ch.Delta.Role != "assistant" || r.contents > 0 {
				t.Errorf("role chunk %q after %d content chunks", ch.Delta.Role, r.contents)
			}
		default:
			if r.finishes > 0 {
				t.Errorf("content after finish_reason")
			}
			if chat {
				r.content[ch.Index] += *ch.Delta.Content
			} else {
				r.content[ch.Index] += ch.Text
			}
			r.contents++
		}
	}
	return r
}

func TestChatStream(t *testing.T) {
	tests := []struct {
		name         string
		opts         mockllm.Options
		give         string
		wantContents int
		wantChoices  int
		wantUsage    bool
	}{
		{
			name:         "default five chunks",
			give:         `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"tell me a story about a gateway"}]}`,
			wantContents: 5,
			wantChoices:  1,
		},
		{
			name:         "include_usage",
			give:         `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"tell me a story"}]}`,
			wantContents: 5,
			wantChoices:  1,
			wantUsage:    true,
		},
		{
			name:         "include_usage false",
			give:         `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":false},"messages":[{"role":"user","content":"tell me a story"}]}`,
			wantContents: 5,
			wantChoices:  1,
		},
		{
			name:         "options chunks",
			opts:         mockllm.Options{StreamChunks: 12},
			give:         `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"héllo wörld, ünïcode ✓ ok"}]}`,
			wantContents: 12,
			wantChoices:  1,
		},
		{
			name:         "override chunks and n",
			give:         `{"model":"gpt-4o-mini","stream":true,"n":2,"mock":{"chunks":3},"messages":[{"role":"user","content":"hi"}]}`,
			wantContents: 6,
			wantChoices:  2,
		},
		{
			name:         "short reply gives fewer chunks",
			give:         `{"model":"gpt-4o-mini","stream":true,"mock":{"reply":"abc"},"messages":[{"role":"user","content":"hi"}]}`,
			wantContents: 3,
			wantChoices:  1,
		},
		{
			name:         "empty reply still has one content chunk",
			give:         `{"model":"gpt-4o-mini","stream":true,"mock":{"reply":""},"messages":[{"role":"user","content":"hi"}]}`,
			wantContents: 1,
			wantChoices:  1,
		},
		{
			name:         "escaping",
			give:         `{"model":"gpt-4o-mini","stream":true,"mock":{"chunks":40},"messages":[{"role":"user","content":"quote \" back \\ nl \n tab \t ctl \u0001 <html> & \u2028"}]}`,
			wantContents: 40,
			wantChoices:  1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ts := startServer(t, tt.opts)
			resp, events, err := postStream(t, ts, "/v1/chat/completions", tt.give)
			if err != nil {
				t.Fatalf("read stream: %v", err)
			}
			if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
				t.Fatalf("status, Content-Type = %d, %q; want 200, text/event-stream", resp.StatusCode, resp.Header.Get("Content-Type"))
			}
			got := parseStream(t, events, true)

			// The same body without stream gives the reference answer.
			_, _, body := post(t, ts, "/v1/chat/completions", plainBody(tt.give))
			want := decode[chatCompletion](t, body)

			if got.id != want.ID {
				t.Errorf("stream id = %q, plain id = %q; want the same", got.id, want.ID)
			}
			if len(got.content) != tt.wantChoices {
				t.Fatalf("streamed %d choices, want %d", len(got.content), tt.wantChoices)
			}
			for i, c := range got.content {
				if c != want.Choices[i].Message.Content {
					t.Errorf("choice %d streamed %q, want %q", i, c, want.Choices[i].Message.Content)
				}
			}
			if got.contents != tt.wantContents {
				t.Errorf("content chunks = %d, want %d", got.contents, tt.wantContents)
			}
			if got.finishes != tt.wantChoices {
				t.Errorf("finish chunks = %d, want %d", got.finishes, tt.wantChoices)
			}
			if !got.done {
				t.Errorf("no [DONE]")
			}
			if tt.wantUsage {
				if got.usage == nil || *got.usage != want.Usage {
					t.Errorf("usage chunk = %+v, want %+v", got.usage, want.Usage)
				}
				if !got.usageNull {
					t.Errorf(`chunks before the usage chunk lack "usage": null`)
				}
			} else if got.usage != nil {
				t.Errorf("usage chunk %+v, want none", got.usage)
			}
		})
	}
}

func TestStreamFirstChunkIsRole(t *testing.T) {
	_, ts := startServer(t, mockllm.Options{})
	_, events, err := postStream(t, ts, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"chatcmpl-`
	if len(events) == 0 || !strings.HasPrefix(events[0], want) || !strings.Contains(events[0], `"delta":{"role":"assistant","content":""}`) {
		t.Errorf("first event = %v, want a role chunk", events)
	}
	if got := events[len(events)-1]; got != "[DONE]" {
		t.Errorf("last event = %q, want [DONE]", got)
	}
}

var streamFields = regexp.MustCompile(`"stream":true,|"stream_options":\{[^}]*\},`)

// plainBody removes stream and stream_options from a body, leaving every
// other byte as it is.
func plainBody(body string) string {
	return streamFields.ReplaceAllString(body, "")
}
