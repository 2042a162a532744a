package openai

import (
	"bytes"
	"testing"
)

// answerUsageBodies are answers of every kind Answer and Usage tell
// apart, and the odd ones they must agree on.
var answerUsageBodies = []string{
	`{"id":"c","object":"chat.completion","model":"gpt-4o-mini-2024-07-18","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}}`,
	`{"object":"text_completion","choices":[{"text":"x"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`,
	`{"object":"list","data":[{"embedding":[0.1]}],"model":"text-embedding-3-small","usage":{"prompt_tokens":5,"total_tokens":5}}`,
	`{"choices":[],"usage":null}`,
	`{"choices":[]}`,
	`{"choices":{}}`,
	`{"object":"chat.completion","choices":[],"error":null,"usage":{"prompt_tokens":1}}`,
	`{"error":{"message":"x"},"choices":[]}`,
	`{"object":7,"choices":[]}`,
	`{"object":null,"choices":[],"model":null,"usage":{"prompt_tokens":2,"completion_tokens":1}}`,
	`{"choices":[],"model":3,"usage":{"prompt_tokens":2}}`,
	`{"choices":[],"usage":{"prompt_tokens":"2"}}`,
	`{"choices":[],"usage":{"prompt_tokens":-1}}`,
	`{"choices":[],"usage":{"prompt_tokens":99999999999}}`,
	`{"choices":[],"usage":{"completion_tokens":2}}`,
	`{"choices":[],"usage":"lots"}`,
	`{"choices":[],"usage":{"prompt_tokens":1,"prompt_tokens_details":null}}`,
	`{"Choices":[],"USAGE":{"Prompt_Tokens":3}}`,
	`{"choices":[],"model":"a","model":"b","usage":{"prompt_tokens":1}}`,
	`{"object":"response","choices":[]}`,
	`[1,2]`,
	`{"choices":[]`,
	``,
	`null`,
}

// AnswerUsage is exactly Answer and Usage, for every endpoint.
func TestAnswerUsageIsAnswerAndUsage(t *testing.T) {
	for _, ep := range []string{ChatCompletionsPath, CompletionsPath, EmbeddingsPath} {
		for _, b := range answerUsageBodies {
			checkAnswerUsage(t, ep, []byte(b))
		}
	}
}

func checkAnswerUsage(t *testing.T, endpoint string, body []byte) {
	t.Helper()
	var f Format
	ok, u := f.AnswerUsage(endpoint, body)
	wantOK := f.Answer(endpoint, body)
	var want = f.Usage(body)
	if !wantOK {
		want = u
		want.Prompt, want.Completion, want.Cached, want.Model, want.Known = 0, 0, 0, "", false
	}
	if ok != wantOK || u != want {
		t.Errorf("%s %s: AnswerUsage = %v %+v; Answer %v, Usage %+v", endpoint, body, ok, u, wantOK, want)
	}
}

// FuzzAnswerUsage: on any body without a repeated "usage" member (where
// Usage's decode merges the two and AnswerUsage takes the last, as for
// every other member), AnswerUsage is Answer and Usage.
func FuzzAnswerUsage(f *testing.F) {
	for _, b := range answerUsageBodies {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if bytes.Count(bytes.ToLower(body), []byte(`usage`)) > 1 {
			return
		}
		for _, ep := range []string{ChatCompletionsPath, CompletionsPath, EmbeddingsPath} {
			checkAnswerUsage(t, ep, body)
		}
	})
}
