package mockllm

import (
	"bytes"
	"encoding/json"
	"net/http"
)

type textCompletion = completion[textChoice]

type textChoice struct {
	Text         string    `json:"text"`
	Index        int       `json:"index"`
	Logprobs     *struct{} `json:"logprobs"` // always null
	FinishReason string    `json:"finish_reason"`
}

// serveCompletion answers POST /v1/completions: one choice per prompt and
// n, indexed prompt*n + j as OpenAI does. It reports whether the client went
// away before the answer was complete.
func (s *Server) serveCompletion(w http.ResponseWriter, r *http.Request, req *request, pl *plan, hash string) (gone bool) {
	prompts, err := promptTexts(req.Prompt)
	if err != nil {
		s.writeBadRequest(w, err.Error(), "prompt")
		return false
	}
	if len(prompts)*req.N > maxChoices {
		s.writeBadRequest(w, "Too many choices: prompts times n must be at most 128.", "n")
		return false
	}
	words, replyWords := 0, 0
	replies := make([]string, 0, len(prompts)*req.N)
	for _, p := range prompts {
		words += wordCount(p)
		reply := replyPrefix + p
		if req.Mock.Reply != nil {
			reply = *req.Mock.Reply
		}
		for range req.N {
			replies = append(replies, reply)
			replyWords += wordCount(reply)
		}
	}
	u := newUsage(words, replyWords)
	id := "cmpl-" + hash

	if req.Stream {
		return s.stream(w, r, req.streamSpec(id, replies, u), pl)
	}

	c := textCompletion{
		ID:                id,
		Object:            "text_completion",
		Created:           created,
		Model:             req.Model,
		SystemFingerprint: fingerprint,
		Choices:           make([]textChoice, len(replies)),
		Usage:             u,
	}
	for i, reply := range replies {
		c.Choices[i] = textChoice{Text: reply, Index: i, FinishReason: "stop"}
	}
	s.writeJSON(w, mustMarshal(c), pl.cutAfter >= 0)
	return false
}

// promptTexts returns the prompts of a completions request: a string, an
// array of strings, or token arrays, which are used as their JSON text (the
// mock has no tokenizer).
func promptTexts(raw json.RawMessage) ([]string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("", "'prompt' is a required property.")
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []string{s}, nil
	case '[':
		var ss []string
		if err := json.Unmarshal(raw, &ss); err == nil {
			if len(ss) == 0 {
				return nil, badRequest("", "'prompt' must not be an empty array.")
			}
			return ss, nil
		}
		return tokenTexts(raw)
	}
	return nil, badRequest("", "'prompt' must be a string, an array of strings or token arrays.")
}

// tokenTexts handles [1,2,3] (one input) and [[1,2],[3]] (several): each
// input becomes its compact JSON text.
func tokenTexts(raw json.RawMessage) ([]string, error) {
	var one []int64
	if err := json.Unmarshal(raw, &one); err == nil {
		if len(one) == 0 {
			return nil, badRequest("", "A token array must not be empty.")
		}
		return []string{string(mustMarshal(one))}, nil
	}
	var many [][]int64
	if err := json.Unmarshal(raw, &many); err != nil || len(many) == 0 {
		return nil, badRequest("", "The input must be a string, an array of strings or token arrays.")
	}
	out := make([]string, len(many))
	for i, t := range many {
		out[i] = string(mustMarshal(t))
	}
	return out, nil
}
