package anthropic

import (
	"encoding/json"
	"testing"
)

func TestNewModelList(t *testing.T) {
	tests := []struct {
		name string
		give []string
		want string
	}{
		{"two", []string{"claude-a", "claude-b"}, `{"data":[` +
			`{"type":"model","id":"claude-a","display_name":"claude-a","created_at":"1970-01-01T00:00:00Z"},` +
			`{"type":"model","id":"claude-b","display_name":"claude-b","created_at":"1970-01-01T00:00:00Z"}],` +
			`"has_more":false,"first_id":"claude-a","last_id":"claude-b"}`},
		{"empty", []string{}, `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
		{"nil", nil, `{"data":[],"has_more":false,"first_id":null,"last_id":null}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(NewModelList(tt.give, "1970-01-01T00:00:00Z"))
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tt.want {
				t.Errorf("got  %s\nwant %s", b, tt.want)
			}
		})
	}
}
