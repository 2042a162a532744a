package openai

import (
	"encoding/json"

	"github.com/corralhq/corral/internal/wire"
)

// jsonKind keeps only the first byte of a JSON value ('[', '{', '"', 'n'
// for null, ...): all Answer needs of choices, data and error, without the
// copy a json.RawMessage makes.
type jsonKind byte

// UnmarshalJSON implements json.Unmarshaler.
func (k *jsonKind) UnmarshalJSON(b []byte) error {
	if len(b) > 0 {
		*k = jsonKind(b[0])
	}
	return nil
}

// AnswerUsage implements wire.AnswerUsager: Answer and Usage in one
// decode. The fields Usage reads are decoded raw and then as Usage decodes
// them, so a value of the wrong type there (which fails Usage's decode)
// leaves Answer's verdict as Answer's own decode would have.
func (Format) AnswerUsage(endpoint string, body []byte) (bool, wire.Usage) {
	var v struct {
		Object  *string         `json:"object"`
		Choices jsonKind        `json:"choices"`
		Data    jsonKind        `json:"data"`
		Error   jsonKind        `json:"error"`
		Model   json.RawMessage `json:"model"`
		Usage   json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || (v.Error != 0 && v.Error != 'n') {
		return false, wire.Usage{}
	}
	object, list := "chat.completion", v.Choices
	switch endpoint {
	case CompletionsPath:
		object = "text_completion"
	case EmbeddingsPath:
		object, list = "list", v.Data
	}
	if list != '[' || (v.Object != nil && *v.Object != object) {
		return false, wire.Usage{}
	}
	if len(v.Usage) == 0 {
		return true, wire.Usage{}
	}
	return true, usageOf(v.Model, v.Usage)
}

// usageOf is Usage of a body whose model and usage members are model and
// usage (raw; model may be absent).
func usageOf(model, usage json.RawMessage) wire.Usage {
	var v struct {
		PromptTokens        *wire.Count `json:"prompt_tokens"`
		CompletionTokens    wire.Count  `json:"completion_tokens"`
		PromptTokensDetails *struct {
			CachedTokens wire.Count `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	}
	var m string
	if len(model) > 0 && json.Unmarshal(model, &m) != nil {
		return wire.Usage{}
	}
	if json.Unmarshal(usage, &v) != nil || v.PromptTokens == nil {
		return wire.Usage{}
	}
	u := wire.Usage{Prompt: int(*v.PromptTokens), Completion: int(v.CompletionTokens), Model: m, Known: true}
	if d := v.PromptTokensDetails; d != nil {
		u.Cached = int(d.CachedTokens)
	}
	return u.Checked()
}
