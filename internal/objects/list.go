package objects

import (
	"encoding/json"
	"fmt"
)

// Page is one page of an upstream list answer
// ({"object":"list","data":[...],"first_id":...,"last_id":...,"has_more":...}).
type Page struct {
	fields map[string]json.RawMessage
	// Items are the page's objects as the upstream sent them; IDs their ids.
	Items []json.RawMessage
	IDs   []string
	// HasMore is the upstream's has_more.
	HasMore bool
}

// ParsePage reads a list answer.
func ParsePage(body []byte) (*Page, error) {
	p := &Page{}
	if err := json.Unmarshal(body, &p.fields); err != nil {
		return nil, fmt.Errorf("objects: list page: %w", err)
	}
	if raw, ok := p.fields["data"]; ok {
		if err := json.Unmarshal(raw, &p.Items); err != nil {
			return nil, fmt.Errorf("objects: list page data: %w", err)
		}
	}
	if raw, ok := p.fields["has_more"]; ok {
		_ = json.Unmarshal(raw, &p.HasMore)
	}
	p.IDs = make([]string, len(p.Items))
	for i, it := range p.Items {
		var o struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(it, &o)
		p.IDs[i] = o.ID
	}
	return p, nil
}

// Encode writes the page with only items (and their ids) in data,
// first_id and last_id set to match them, and has_more as given. Every
// other field of the upstream's answer is kept.
func (p *Page) Encode(items []json.RawMessage, ids []string, hasMore bool) []byte {
	out := make(map[string]json.RawMessage, len(p.fields)+4)
	for k, v := range p.fields {
		out[k] = v
	}
	if items == nil {
		items = []json.RawMessage{}
	}
	out["data"], _ = json.Marshal(items)
	first, last := json.RawMessage("null"), json.RawMessage("null")
	if len(ids) > 0 {
		first, _ = json.Marshal(ids[0])
		last, _ = json.Marshal(ids[len(ids)-1])
	}
	if _, ok := p.fields["first_id"]; ok || len(ids) > 0 {
		out["first_id"] = first
	}
	if _, ok := p.fields["last_id"]; ok || len(ids) > 0 {
		out["last_id"] = last
	}
	out["has_more"], _ = json.Marshal(hasMore)
	if _, ok := out["object"]; !ok {
		out["object"] = json.RawMessage(`"list"`)
	}
	b, _ := json.Marshal(out)
	return b
}
