// Package negcache decides what an upstream outcome means for the cache:
// store it as an answer, remember it briefly as a known failure, or let
// the next request try again. The table below is the one place that
// decides it, and it reads like the failure classification of the design.
//
// It owns the negative entries too: their key (Key: their own key kind,
// keying.Negative, "n", in the same stores as positive ones, memory or
// Redis), which answers are remembered (Decide), and which entry a lookup
// serves (Pick: a positive entry always wins over a negative one). Their
// TTL is short and the tenant's (CORRAL_NEGATIVE_TTL, per-tenant
// negative_ttl), so a remembered failure can never be mistaken for an
// answer and never outlives its cause for long.
package negcache

import "encoding/json"

// Class is what Corral does with an upstream outcome.
type Class uint8

const (
	// Answer: a complete 200; store it positively for the tenant's TTL.
	Answer Class = iota + 1
	// Deterministic: the same request will fail the same way (invalid
	// request, unknown model, context length, content policy); remember it
	// negatively so it is not paid for again within the negative TTL.
	Deterministic
	// UpstreamAuth: Corral's own upstream credential was refused; store
	// nothing and answer 502, never telling the client its key is bad.
	UpstreamAuth
	// Transient: it may work next time (timeouts, throttling, conflicts,
	// server errors, broken connections and streams); store nothing so the
	// next wave may fly.
	Transient
)

func (c Class) String() string {
	switch c {
	case Answer:
		return "answer"
	case Deterministic:
		return "deterministic"
	case UpstreamAuth:
		return "upstream_auth"
	case Transient:
		return "transient"
	}
	return "unknown"
}

// table is the failure classification of the design, status by status.
// Statuses not listed are Transient: storing a failure Corral does not
// understand could pin a fault for a whole TTL.
var table = []struct {
	statuses []int
	class    Class
	why      string
}{
	{[]int{200}, Answer, "complete answer"},
	{[]int{400, 404, 422}, Deterministic, "invalid request, unknown model, context length, content policy"},
	{[]int{401, 403}, UpstreamAuth, "Corral's upstream credential is wrong"},
	{[]int{408, 409, 429}, Transient, "timeout, conflict, throttling: the next wave may fly"},
}

// classes is table indexed by status, built once.
var classes = func() map[int]Class {
	m := make(map[int]Class)
	for _, row := range table {
		for _, s := range row.statuses {
			m[s] = row.class
		}
	}
	return m
}()

// Classify returns the class of an upstream HTTP status. Everything not
// in the table (5xx, 3xx, other 4xx) is Transient. A call that produced no
// status (timeout, connection error) or a stream cut short is Transient
// too; callers need not classify those.
func Classify(status int) Class {
	if c, ok := classes[status]; ok {
		return c
	}
	return Transient
}

// ClassifyResponse is Classify with the body in view, for the one status
// whose meaning depends on it: a 404 is Deterministic only when the
// upstream says the model is unknown (error code "model_not_found"). Any
// other 404 is the URL's fault, not the request's: a base URL without its
// /v1, a proxy that lost a route. Remembering that would answer a fixed
// configuration with the old error for a whole negative TTL, so it is
// Transient.
func ClassifyResponse(status int, body []byte) Class {
	c := Classify(status)
	if status == 404 && c == Deterministic && errorCode(body) != "model_not_found" {
		return Transient
	}
	return c
}

// errorCode reads error.code from an OpenAI-shaped error body ("" when
// absent, null or not a string).
func errorCode(body []byte) string {
	var e struct {
		Error struct {
			Code any `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	code, _ := e.Error.Code.(string)
	return code
}
