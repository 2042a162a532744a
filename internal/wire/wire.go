// Package wire is the one interface between Corral's request path and an
// API's wire format. The server (HTTP) and the flight layer
// (internal/coalesce) know requests and answers only through a Format, so
// serving a new API (the Responses API, Anthropic's Messages API) is a new
// package beside internal/wire/openai plus a route, with no change to
// either.
//
// A Format answers five questions:
//   - keying policy and facts: what canonicalisation keeps of a body and
//     what Corral must know about it (model, streaming, token estimate);
//   - stream assembly: turning an upstream event stream into the stored
//     answer and its usage (Assembler), and reading the usage of a whole
//     answer;
//   - replay: turning a stored answer back into the API's event stream;
//   - what a follower's stream leaves out (a usage chunk nobody asked for);
//   - the error shape, as a JSON body and as a stream's last event
//     (numbered after the events before it, where the API numbers them).
//
// Events are raw Server-Sent Events as internal/wire/sse reads them
// ("event:" and "data:" lines and the blank line that ends them), so a
// format whose events are typed (event: + data:, no [DONE]) fits as well as
// OpenAI's data-only chunks.
package wire

// Format is one API's wire format. Implementations are stateless and safe
// for concurrent use, and comparable values: the server keys the replays
// it shares by them.
type Format interface {
	// Parse keys body for tenant and endpoint and reads its facts, in one
	// pass. An error means the body is not a valid request (400).
	Parse(tenant, endpoint string, body []byte) (Facts, error)
	// Prepare returns the body a streaming flight sends upstream (OpenAI
	// asks for the usage chunk), or body itself. changed reports a body
	// that differs from the client's.
	Prepare(f Facts, body []byte) (out []byte, changed bool)
	// IsEnd reports whether ev is a stream's final event (OpenAI's
	// [DONE]), for relays that pass a stream through without assembling it.
	IsEnd(ev []byte) bool
	// NewAssembler returns an Assembler for a stream answering endpoint.
	NewAssembler(endpoint string) Assembler
	// Answer reports whether a 200's body is the API's success object
	// for endpoint (a chat.completion, a response, a message, ...). Only
	// such a body may be stored: a 200 carrying {"error":...} or anything
	// else is passed through as a transient failure.
	Answer(endpoint string, body []byte) bool
	// Usage reads the token usage of a whole (non-streamed) answer.
	Usage(body []byte) Usage
	// Replay renders a stored answer as the stream a client asking f
	// would have received. An error means the answer cannot be streamed
	// (embeddings); it is then served as JSON. It depends on its
	// arguments alone, so the server renders a large answer once for
	// every reader asking the same, and the events are read-only.
	Replay(endpoint string, body []byte, f Facts) ([][]byte, error)
	// Hidden reports the events of a live stream that a follower asking f
	// does not receive; nil hides nothing.
	Hidden(f Facts) func(ev []byte) bool
	// ErrorBody renders an error Corral answers with itself.
	ErrorBody(e Error) []byte
	// ErrorEvent renders e as the last event of a stream Corral must cut.
	// next is the stream's next sequence number (NextSequence over the
	// events sent before it): a format whose events are numbered (the
	// Responses API's sequence_number) numbers the error event with it,
	// the others ignore it.
	ErrorEvent(e Error, next int64) []byte
	// Sequence reads the sequence number an event carries; ok is false
	// for an event without one, and always in a format that numbers none.
	Sequence(ev []byte) (n int64, ok bool)
}

// NextSequence is the sequence number that follows ev in a stream of f
// where next would have followed the event before it: ev's own number
// plus one, or next plus one for an event that carries none. A stream's
// first event follows 0.
func NextSequence(f Format, next int64, ev []byte) int64 {
	if n, ok := f.Sequence(ev); ok {
		return n + 1
	}
	return next + 1
}

// Facts are what Corral learns from a request body.
type Facts struct {
	Hash         string // hex sha256 of the canonical body (keying)
	Model        string // "" when absent
	Stream       bool   // the client asked for an event stream
	IncludeUsage bool   // a streaming client asked for the usage event
	Estimate     int    // tokens/min charged before the upstream call
	// Bypass, when set, says why this request is never cached or
	// coalesced (a background run, a hosted tool, ...): it goes upstream
	// as a BYPASS, with the reason in the access log.
	Bypass string
}

// Usage is an answer's token usage and the model that used it, what
// tokens/min charges and what internal/spend prices.
type Usage struct {
	// Prompt is every input token, cache reads and writes included;
	// Completion every output token.
	Prompt, Completion int
	// Cached is the part of Prompt the provider read from its prompt
	// cache; CacheWrite the part it wrote to it (Anthropic's
	// cache_creation_input_tokens).
	Cached, CacheWrite int
	// Model is the model the upstream answered with ("gpt-4o-mini-2024-07-18");
	// "" when the answer does not say.
	Model string
	// Known is false when the answer carried no usage (a stream that did
	// not ask for it) or usage Corral does not believe (a figure Count
	// refuses, or one Checked disbelieves); the call is then charged its
	// estimate, never less.
	Known bool
}

// Total is the tokens the answer used.
func (u Usage) Total() int { return u.Prompt + u.Completion }

// Assembler rebuilds the stored answer from a stream's events, in order.
// It is not safe for concurrent use.
type Assembler interface {
	// Add takes one raw event; it may keep nothing of ev after it returns.
	// end reports the stream's final event (OpenAI's [DONE]). A broken or
	// unreadable event makes the stream unstorable; Finish reports it.
	Add(ev []byte) (end bool)
	// Finish returns the whole answer's body and usage after the final
	// event; an error means the stream may not be stored.
	Finish() (body []byte, u Usage, err error)
}

// Error is an error Corral answers with itself, before a format renders it.
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
	Param   string // "" renders as null where the API has a param field
}

// AnswerUsager is a Format that reads a body's Answer and Usage in one
// decode: every 200 an upstream answers with is checked and then has its
// usage read, and the second full JSON decode was a tenth of the upstream
// path's CPU.
type AnswerUsager interface {
	// AnswerUsage returns exactly what Answer(endpoint, body) and, when
	// that is true, Usage(body) return (the zero Usage otherwise).
	AnswerUsage(endpoint string, body []byte) (bool, Usage)
}

// AnswerUsage is f's Answer for body and, when it is one, its Usage, in
// one decode when f is an AnswerUsager.
func AnswerUsage(f Format, endpoint string, body []byte) (bool, Usage) {
	if au, ok := f.(AnswerUsager); ok {
		return au.AnswerUsage(endpoint, body)
	}
	if !f.Answer(endpoint, body) {
		return false, Usage{}
	}
	return true, f.Usage(body)
}
