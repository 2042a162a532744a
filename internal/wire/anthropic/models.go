package anthropic

// ModelList is Anthropic's answer to GET /v1/models: one page of models,
// {"data":[{"type":"model","id":...,"display_name":...,"created_at":...}],
// "has_more":false,"first_id":...,"last_id":...}. first_id and last_id are
// null for an empty page, as Anthropic's API answers.
type ModelList struct {
	Data    []Model `json:"data"`
	HasMore bool    `json:"has_more"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
}

// Model is one entry of a ModelList.
type Model struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	DisplayName string `json:"display_name"`
	CreatedAt   string `json:"created_at"`
}

// NewModelList lists ids, in order and on one page, each displayed under
// its id and created at createdAt (RFC 3339): Corral knows no more of a
// model than its id, so the list an allow-list yields says no more either.
func NewModelList(ids []string, createdAt string) ModelList {
	l := ModelList{Data: make([]Model, len(ids))}
	for i, id := range ids {
		l.Data[i] = Model{Type: "model", ID: id, DisplayName: id, CreatedAt: createdAt}
	}
	if n := len(l.Data); n > 0 {
		l.FirstID, l.LastID = &l.Data[0].ID, &l.Data[n-1].ID
	}
	return l
}
