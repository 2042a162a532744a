package azuretest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// The model endpoints: chat completions (streamed or not), completions
// and embeddings, answered as Azure answers them (content-filter
// annotations, the deployment's model in "model", a first stream chunk
// with no choices carrying prompt_filter_results).

const keyRefused = "Access denied due to invalid subscription key or wrong API endpoint. Make sure to provide a valid key for an active subscription and use a correct regional API endpoint for your resource."

const tokenRefused = "Unauthorized. Access token is missing, invalid, audience is incorrect (https://cognitiveservices.azure.com), or have expired."

// authorized checks the call's api-key or bearer token, answering Azure's
// 401 when neither is good.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request) bool {
	if k := r.Header.Get("Api-Key"); k != "" {
		if k == s.o.APIKey {
			return true
		}
		azureError(w, http.StatusUnauthorized, "401", keyRefused)
		return false
	}
	if tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		s.mu.Lock()
		exp, known := s.tokens[tok]
		s.mu.Unlock()
		if known && s.o.Now().Before(exp) {
			return true
		}
		azureError(w, http.StatusUnauthorized, "401", tokenRefused)
		return false
	}
	azureError(w, http.StatusUnauthorized, "401", keyRefused)
	return false
}

func azureError(w http.ResponseWriter, status int, code, msg string) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"code": code, "message": msg}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// resourceNotFound is Azure's answer to a path (or a classic call without
// api-version) it does not have, byte for byte.
func resourceNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = w.Write([]byte(`{"error":{"code":"404","message": "Resource not found"}}`))
}

func deploymentNotFound(w http.ResponseWriter) {
	azureError(w, http.StatusNotFound, "DeploymentNotFound", "The API deployment for this resource does not exist. If you created the deployment within the last 5 minutes, please wait a moment and try again.")
}

func jsonModel(body []byte) string {
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(body, &v)
	return v.Model
}

var safe = map[string]any{"filtered": false, "severity": "safe"}

func filterResults() map[string]any {
	return map[string]any{"hate": safe, "self_harm": safe, "sexual": safe, "violence": safe}
}

func promptFilter() []any {
	return []any{map[string]any{"prompt_index": 0, "content_filter_results": filterResults()}}
}

// contentFiltered is Azure's 400 for a prompt its content filter refuses.
func contentFiltered(w http.ResponseWriter) {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{
		"message": "The response was filtered due to the prompt triggering Azure OpenAI's content management policy. Please modify your prompt and retry. To learn more about our content filtering policies please read our documentation: https://go.microsoft.com/fwlink/?linkid=2198766",
		"type":    nil, "param": "prompt", "code": "content_filter", "status": 400,
		"innererror": map[string]any{"code": "ResponsibleAIPolicyViolation", "content_filter_result": map[string]any{
			"hate": safe, "self_harm": safe, "sexual": safe, "violence": map[string]any{"filtered": true, "severity": "medium"}}},
	}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusBadRequest)
	_, _ = w.Write(b)
}

// throttled is Azure's 429 with its retry and rate-limit headers.
func throttled(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Retry-After", "7")
	h.Set("Retry-After-Ms", "7000")
	h.Set("X-Ratelimit-Remaining-Requests", "0")
	h.Set("X-Ratelimit-Remaining-Tokens", "0")
	azureError(w, http.StatusTooManyRequests, "429", "Requests to the ChatCompletions_Create Operation under Azure OpenAI API version 2024-10-21 have exceeded call rate limit of your current OpenAI S0 pricing tier. Please retry after 7 seconds. Please go here: https://aka.ms/oai/quotaincrease if you would like to further increase the default rate limit.")
}

// model answers a model endpoint for model, the deployment's.
func (s *Server) model(w http.ResponseWriter, r *http.Request, path, model string, body []byte) {
	if r.Method != http.MethodPost {
		resourceNotFound(w)
		return
	}
	var req struct {
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Prompt        json.RawMessage `json:"prompt"`
		Input         json.RawMessage `json:"input"`
		Stream        bool            `json:"stream"`
		StreamOptions struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		azureError(w, http.StatusBadRequest, "BadRequest", "We could not parse the JSON body of your request.")
		return
	}
	var prompt string
	for _, m := range req.Messages {
		var text string
		if json.Unmarshal(m.Content, &text) == nil && m.Role == "user" {
			prompt = text
		}
	}
	if path == "/completions" {
		_ = json.Unmarshal(req.Prompt, &prompt)
	}
	switch {
	case strings.Contains(prompt, "FilterMe"):
		contentFiltered(w)
		return
	case strings.Contains(prompt, "ThrottleMe"):
		throttled(w)
		return
	}
	reply := "Azure " + model + " says: " + prompt
	usage := map[string]int{"prompt_tokens": len(strings.Fields(prompt)) + 7, "completion_tokens": len(strings.Fields(reply))}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	created := time.Now().Unix()
	w.Header().Set("Apim-Request-Id", "9f0c2c5e-0000-4000-8000-000000000001")
	w.Header().Set("X-Ms-Region", "East US")
	w.Header().Set("X-Ms-Deployment-Name", "fake-deployment")
	switch path {
	case "/chat/completions":
		id := fmt.Sprintf("chatcmpl-%d", created)
		if req.Stream {
			s.streamChat(w, id, model, created, reply, usage, req.StreamOptions.IncludeUsage)
			return
		}
		writeJSON(w, map[string]any{"id": id, "object": "chat.completion", "created": created, "model": model,
			"system_fingerprint": "fp_azure", "prompt_filter_results": promptFilter(), "usage": usage,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message":                map[string]any{"role": "assistant", "content": reply, "refusal": nil},
				"content_filter_results": filterResults()}}})
	case "/completions":
		writeJSON(w, map[string]any{"id": fmt.Sprintf("cmpl-%d", created), "object": "text_completion", "created": created, "model": model,
			"prompt_filter_results": promptFilter(), "usage": usage,
			"choices": []any{map[string]any{"index": 0, "text": reply, "finish_reason": "stop", "logprobs": nil, "content_filter_results": filterResults()}}})
	case "/embeddings":
		writeJSON(w, map[string]any{"object": "list", "model": model, "usage": map[string]int{"prompt_tokens": 3, "total_tokens": 3},
			"data": []any{map[string]any{"object": "embedding", "index": 0, "embedding": []float64{0.25, -0.5, 0.125}}}})
	default:
		resourceNotFound(w) // audio and images are not modelled by the fake
	}
}

// streamChat streams reply as Azure does: a first chunk with no choices
// and the prompt's filter results, a delta per word with its content
// filter results, the finish chunk, a usage chunk when asked, [DONE].
func (s *Server) streamChat(w http.ResponseWriter, id, model string, created int64, reply string, usage map[string]int, withUsage bool) {
	w.Header().Set("Content-Type", "text/event-stream")
	fl, _ := w.(http.Flusher)
	send := func(v any) {
		b, _ := json.Marshal(v)
		_, _ = fmt.Fprintf(w, "data: %s\n\n", b)
		if fl != nil {
			fl.Flush()
		}
	}
	send(map[string]any{"choices": []any{}, "created": 0, "id": "", "model": "", "object": "", "prompt_filter_results": promptFilter()})
	chunk := func(delta map[string]any, finish any) map[string]any {
		c := map[string]any{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": nil}
		if finish == nil {
			c["content_filter_results"] = filterResults()
		} else {
			c["content_filter_results"] = map[string]any{}
		}
		return map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_azure", "choices": []any{c}}
	}
	send(chunk(map[string]any{"role": "assistant", "content": "", "refusal": nil}, nil))
	words := strings.SplitAfter(reply, " ")
	for _, wd := range words {
		send(chunk(map[string]any{"content": wd}, nil))
	}
	send(chunk(map[string]any{}, "stop"))
	if withUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"system_fingerprint": "fp_azure", "choices": []any{}, "usage": usage})
	}
	_, _ = fmt.Fprint(w, "data: [DONE]\n\n")
	if fl != nil {
		fl.Flush()
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}
