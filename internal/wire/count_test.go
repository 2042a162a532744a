package wire

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestCountDecodesOnlyBelievableFigures(t *testing.T) {
	tests := []struct {
		give string
		want Count
		bad  bool
	}{
		{give: `0`, want: 0},
		{give: `1200`, want: 1200},
		{give: `1073741824`, want: MaxTokens},
		{give: `null`, want: 0},
		{give: `1073741825`, bad: true},
		{give: `9223372036854775807`, bad: true},
		{give: `99999999999999999999999`, bad: true},
		{give: `-1`, bad: true},
		{give: `-0`, bad: true},
		{give: `1000.5`, bad: true},
		{give: `1000.0`, bad: true},
		{give: `1e3`, bad: true},
		{give: `"1000"`, bad: true},
		{give: `true`, bad: true},
		{give: `{}`, bad: true},
		{give: `[]`, bad: true},
	}
	for _, tt := range tests {
		var c Count
		err := json.Unmarshal([]byte(tt.give), &c)
		if tt.bad {
			if !errors.Is(err, ErrBadCount) {
				t.Errorf("%s: err %v; want ErrBadCount", tt.give, err)
			}
			continue
		}
		if err != nil || c != tt.want {
			t.Errorf("%s: %d, %v; want %d", tt.give, c, err, tt.want)
		}
	}
}

func TestCheckedDisbelievesImpossibleUsage(t *testing.T) {
	tests := []struct {
		name string
		give Usage
		want Usage
	}{
		{"believable", Usage{Prompt: 100, Completion: 5, Cached: 40, CacheWrite: 60, Model: "m", Known: true},
			Usage{Prompt: 100, Completion: 5, Cached: 40, CacheWrite: 60, Model: "m", Known: true}},
		{"unknown stays unknown", Usage{}, Usage{}},
		{"negative", Usage{Prompt: -1, Known: true}, Usage{}},
		{"negative completion", Usage{Prompt: 1, Completion: -1, Known: true}, Usage{}},
		{"too large", Usage{Prompt: MaxTokens + 1, Known: true}, Usage{}},
		{"more cached than input", Usage{Prompt: 10, Cached: 11, Known: true}, Usage{}},
		{"cached and written beyond input", Usage{Prompt: 10, Cached: 6, CacheWrite: 5, Known: true}, Usage{}},
		{"negative cached", Usage{Prompt: 10, Cached: -5, Known: true}, Usage{}},
	}
	for _, tt := range tests {
		if got := tt.give.Checked(); got != tt.want {
			t.Errorf("%s: %+v; want %+v", tt.name, got, tt.want)
		}
	}
}
