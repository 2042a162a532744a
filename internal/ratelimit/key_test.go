package ratelimit

import (
	"errors"
	"strings"
	"testing"
)

func TestKey(t *testing.T) {
	tests := []struct {
		give    string
		kind    Kind
		want    string
		wantErr error
	}{
		{give: "acme", kind: Requests, want: "corral:v1:rl:{acme}:req"},
		{give: "acme", kind: Tokens, want: "corral:v1:rl:{acme}:tok"},
		{give: "a_b-9", kind: Requests, want: "corral:v1:rl:{a_b-9}:req"},
		{give: strings.Repeat("x", 64), kind: Tokens, want: "corral:v1:rl:{" + strings.Repeat("x", 64) + "}:tok"},
		{give: "", kind: Requests, wantErr: ErrBadTenant},
		{give: strings.Repeat("x", 65), kind: Requests, wantErr: ErrBadTenant},
		{give: "Acme", kind: Requests, wantErr: ErrBadTenant},
		{give: "a}b", kind: Requests, wantErr: ErrBadTenant},
		{give: "a{b", kind: Requests, wantErr: ErrBadTenant},
		{give: "a:b", kind: Requests, wantErr: ErrBadTenant},
		{give: "a b", kind: Requests, wantErr: ErrBadTenant},
		{give: "é", kind: Requests, wantErr: ErrBadTenant},
	}
	for _, tt := range tests {
		got, err := Key(tt.give, tt.kind)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("Key(%q, %q) = %q, %v; want %q, %v", tt.give, tt.kind, got, err, tt.want, tt.wantErr)
		}
	}
	if _, err := Key("acme", "bytes"); err == nil {
		t.Error("Key with an unknown kind: err = nil")
	}
}

func TestKindSuffix(t *testing.T) {
	if Requests.Suffix() != "requests" || Tokens.Suffix() != "tokens" {
		t.Fatalf("suffixes %q, %q", Requests.Suffix(), Tokens.Suffix())
	}
}
