package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"

	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/sse"
)

// Format is OpenAI's wire format for chat completions, legacy completions
// and embeddings (and the other /v1 paths Corral proxies).
type Format struct{}

var _ wire.Format = Format{}

// EmbeddingsPath is the endpoint whose answers have no completion.
const EmbeddingsPath = "/embeddings"

// ChatPolicy is the keying policy of chat completions: keying.OpenAI's
// (stream, stream_options, user and metadata do not change the answer)
// and the successors of user, prompt_cache_key (which upstream prompt
// cache to try: a cost, not an answer) and safety_identifier (who the end
// user is, for abuse detection). store stays in the key.
var ChatPolicy = keying.NewPolicy(map[string]keying.Drop{
	"stream":            {Always: keying.Bool | keying.Null},
	"stream_options":    {Always: keying.Null, WhenStreaming: keying.Object},
	"metadata":          {Always: keying.Object | keying.Null},
	"user":              {Always: keying.String | keying.Null},
	"prompt_cache_key":  {Always: keying.String | keying.Null},
	"safety_identifier": {Always: keying.String | keying.Null},
})

// policy is endpoint's keying policy: legacy completions and embeddings
// know neither prompt_cache_key nor safety_identifier, so there the
// fields stay in the key (a body the upstream refuses for them does not
// share an entry with a valid one).
func policy(endpoint string) *keying.Policy {
	if endpoint == ChatCompletionsPath {
		return ChatPolicy
	}
	return keying.OpenAI
}

// Parse implements wire.Format with keying's canonical form under the
// endpoint's policy and OpenAI's token estimate.
func (Format) Parse(tenant, endpoint string, body []byte) (wire.Facts, error) {
	r, err := keying.ParseWith(policy(endpoint), tenant, endpoint, body)
	if err != nil {
		return wire.Facts{}, err
	}
	f := wire.Facts{
		Hash:         r.Hash,
		Model:        r.Model,
		Stream:       r.Stream,
		IncludeUsage: r.IncludeUsage,
		Estimate:     tokenEstimate(endpoint, len(body), r.MaxTokens, r.N),
	}
	if endpoint == ChatCompletionsPath && asksForAudio(body) {
		f.Bypass = "audio output"
	}
	return f, nil
}

// asksForAudio reports a chat request for a spoken answer (modalities
// with "audio", or the audio parameter). Such answers are never cached:
// their message.audio carries an id the upstream keeps only until its
// expires_at (a later turn sends that id back), so a stored answer would
// hand out an id that has expired, and the stream assembler does not
// rebuild audio deltas. The body is decoded only when it mentions audio
// at all, so other prompts pay one scan.
func asksForAudio(body []byte) bool {
	if !bytes.Contains(body, []byte("audio")) {
		return false
	}
	var v struct {
		Modalities []string        `json:"modalities"`
		Audio      json.RawMessage `json:"audio"`
	}
	if json.Unmarshal(body, &v) != nil {
		return true // audio mentioned, modalities unreadable: do not store what may be audio
	}
	return slices.Contains(v.Modalities, "audio") || !isNull(v.Audio)
}

// tokenEstimate is what a request is charged against tokens/min before it
// goes upstream: the whole body at about 4 bytes per token plus n
// completions of max_tokens (DefaultMaxTokens when unset). Every byte
// counts, not only message text: tools, images, tool call arguments and
// token-array inputs are all read by the model, and counting text alone
// would let a body whose bulk is elsewhere in for free. Embeddings have no
// completion.
func tokenEstimate(endpoint string, bodyBytes, maxTokens, n int) int {
	if endpoint == EmbeddingsPath {
		return max((bodyBytes+3)/4, 1)
	}
	return EstimateTokens(bodyBytes, maxTokens, n)
}

// Prepare implements wire.Format: every streaming request is sent asking
// for the usage chunk under every spelling of include_usage it holds
// (WithStreamUsage); one that already asks under each is sent as it came.
func (Format) Prepare(f wire.Facts, body []byte) ([]byte, bool) {
	if !f.Stream {
		return body, false
	}
	return WithStreamUsage(body)
}

// IsEnd implements wire.Format: the data-only event [DONE].
func (Format) IsEnd(ev []byte) bool { return IsDone(sse.Data(ev)) }

// NewAssembler implements wire.Format over Assembler.
func (Format) NewAssembler(endpoint string) wire.Assembler {
	return &streamAssembler{a: NewAssembler(endpoint)}
}

// streamAssembler feeds raw events to an Assembler: [DONE] ends the
// stream, and the first event the Assembler refuses (an error event)
// stops the feeding; Finish reports it.
type streamAssembler struct {
	a      *Assembler
	broken bool
}

func (s *streamAssembler) Add(ev []byte) bool {
	data := sse.Data(ev)
	if IsDone(data) {
		_ = s.a.Add(data) // an earlier refusal is sticky and returned by Finish
		return true
	}
	if len(data) > 0 && !s.broken && s.a.Add(data) != nil {
		s.broken = true // e.g. an error event mid-stream: relayed, never stored
	}
	return false
}

// ErrStreamIncomplete is Finish's answer for a stream without [DONE] or
// with a choice that never finished.
var ErrStreamIncomplete = errors.New("openai: stream incomplete")

func (s *streamAssembler) Finish() ([]byte, wire.Usage, error) {
	if !s.a.Complete() {
		if s.a.err != nil {
			return nil, wire.Usage{}, s.a.err
		}
		return nil, wire.Usage{}, ErrStreamIncomplete
	}
	body, err := s.a.Body()
	if err != nil {
		return nil, wire.Usage{}, err
	}
	// The assembled body holds the usage chunk whole (details included)
	// and the model: one reading for both kinds of answer.
	return body, Format{}.Usage(body), nil
}

// Usage implements wire.Format: the usage object of a whole answer
// (chat, completions, embeddings) and its model. prompt_tokens includes
// prompt_tokens_details.cached_tokens. A usage object without
// prompt_tokens, or with a figure wire.Count refuses or Usage.Checked
// disbelieves, is unread.
func (Format) Usage(body []byte) wire.Usage {
	var v struct {
		Model string       `json:"model"`
		Usage *usageFields `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || v.Usage == nil {
		return wire.Usage{}
	}
	return v.Usage.usage(v.Model)
}

// usageFields are the members of a usage object Usage reads.
type usageFields struct {
	PromptTokens        *wire.Count `json:"prompt_tokens"`
	CompletionTokens    wire.Count  `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens wire.Count `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

// usage is the wire.Usage of an answer by model with these figures
// (unknown without prompt_tokens).
func (v *usageFields) usage(model string) wire.Usage {
	if v.PromptTokens == nil {
		return wire.Usage{}
	}
	u := wire.Usage{Prompt: int(*v.PromptTokens), Completion: int(v.CompletionTokens), Model: model, Known: true}
	if d := v.PromptTokensDetails; d != nil {
		u.Cached = int(d.CachedTokens)
	}
	return u.Checked()
}

// Replay implements wire.Format with Replay.
func (Format) Replay(endpoint string, body []byte, f wire.Facts) ([][]byte, error) {
	return Replay(endpoint, body, f.IncludeUsage)
}

// Hidden implements wire.Format: a follower that did not ask for usage
// does not get the usage chunk the leader's splice asked for.
func (Format) Hidden(f wire.Facts) func([]byte) bool {
	if f.IncludeUsage {
		return nil
	}
	return IsUsageEvent
}

// IsUsageEvent reports whether ev is the usage-only chunk a stream sends
// when include_usage is set: no choices, a usage object. Only events that
// mention usage are decoded, whatever their JSON spacing.
func IsUsageEvent(ev []byte) bool {
	// Every chunk of a stream that asked for usage carries "usage":null;
	// only one with a usage object can be the usage chunk.
	if !bytes.Contains(ev, []byte(`"usage":{`)) && !bytes.Contains(ev, []byte(`"usage": {`)) {
		return false
	}
	var chunk struct {
		Choices []json.RawMessage `json:"choices"`
		Usage   json.RawMessage   `json:"usage"`
	}
	if json.Unmarshal(sse.Data(ev), &chunk) != nil {
		return false
	}
	return chunk.Choices != nil && len(chunk.Choices) == 0 && len(chunk.Usage) > 0 && string(chunk.Usage) != "null"
}

// ErrorBody implements wire.Format: OpenAI's error object,
// {"error":{"message":...,"type":...,"param":...,"code":...}}.
func (Format) ErrorBody(e wire.Error) []byte {
	var param any
	if e.Param != "" {
		param = e.Param
	}
	b, _ := json.Marshal(errorEnvelope{Error: errorDetail{e.Message, e.Type, param, e.Code}})
	return b
}

type errorEnvelope struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string `json:"message"`
	Type    string `json:"type"`
	Param   any    `json:"param"`
	Code    string `json:"code"`
}

// ErrorEvent implements wire.Format: the error object as a data-only
// event, with no [DONE] after it. Chunks are not numbered.
func (f Format) ErrorEvent(e wire.Error, _ int64) []byte { return ErrorEvent(f.ErrorBody(e)) }

// Sequence implements wire.Format: chat and completion chunks carry no
// sequence number.
func (Format) Sequence([]byte) (int64, bool) { return 0, false }

// Answer implements wire.Format: a chat.completion (chat) or a
// text_completion (completions) with a choices array, or an embeddings
// list with a data array; an object member, when present, must name that
// object, and an error member must be absent or null.
func (Format) Answer(endpoint string, body []byte) bool {
	var v answerFields
	return json.Unmarshal(body, &v) == nil && v.is(endpoint)
}

// answerFields are the members Answer reads of a body.
type answerFields struct {
	Object  *string  `json:"object"`
	Choices jsonKind `json:"choices"`
	Data    jsonKind `json:"data"`
	Error   jsonKind `json:"error"`
}

// is reports whether a body with these members is endpoint's answer.
func (v *answerFields) is(endpoint string) bool {
	if v.Error != 0 && v.Error != 'n' { // present and not null
		return false
	}
	object, list := "chat.completion", v.Choices
	switch endpoint {
	case CompletionsPath:
		object = "text_completion"
	case EmbeddingsPath:
		object, list = "list", v.Data
	}
	return list == '[' && (v.Object == nil || *v.Object == object)
}
