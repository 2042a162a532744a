package openai

import (
	"encoding/json"

	"github.com/corralhq/corral/internal/wire"
)

// jsonKind keeps only the first byte of a JSON value ('[', '{', '"', 'n'
// for null, 0 when absent): all Answer needs of choices, data and error,
// without the copy a json.RawMessage makes.
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
		answerFields
		Model json.RawMessage `json:"model"`
		Usage json.RawMessage `json:"usage"`
	}
	if json.Unmarshal(body, &v) != nil || !v.is(endpoint) {
		return false, wire.Usage{}
	}
	var model string
	var u usageFields
	if len(v.Usage) == 0 || (len(v.Model) > 0 && json.Unmarshal(v.Model, &model) != nil) || json.Unmarshal(v.Usage, &u) != nil {
		return true, wire.Usage{} // as Usage's own decode fails or finds none
	}
	return true, u.usage(model)
}
