package keying

import (
	"strings"
	"testing"
)

func TestName(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	tests := []struct {
		give Kind
		want string
	}{
		{Response, "corral:v1:{acme:" + hash + "}:r"},
		{Negative, "corral:v1:{acme:" + hash + "}:n"},
		{Lock, "corral:v1:{acme:" + hash + "}:l"},
		{Stream, "corral:v1:{acme:" + hash + "}:s"},
	}
	for _, tt := range tests {
		if got := Name("acme", hash, tt.give); got != tt.want {
			t.Errorf("Name(acme, hash, %q) = %q, want %q", tt.give, got, tt.want)
		}
	}
}

func TestNameAllocs(t *testing.T) {
	hash := strings.Repeat("ab", 32)
	if got := testing.AllocsPerRun(100, func() { _ = Name("acme", hash, Response) }); got != 1 {
		t.Errorf("Name allocates %v times, want 1", got)
	}
}

func TestTenantPattern(t *testing.T) {
	hash := strings.Repeat("0f", 32)
	pattern := TenantPattern("acme")
	if want := "corral:v1:{acme:*"; pattern != want {
		t.Fatalf("TenantPattern(acme) = %q, want %q", pattern, want)
	}
	// The pattern must cover every kind of this tenant and nothing of a
	// tenant whose id merely starts the same.
	for _, k := range []Kind{Response, Negative, Lock, Stream} {
		if name := Name("acme", hash, k); !strings.HasPrefix(name, strings.TrimSuffix(pattern, "*")) {
			t.Errorf("pattern %q does not match %q", pattern, name)
		}
	}
	if name := Name("acme2", hash, Response); strings.HasPrefix(name, strings.TrimSuffix(pattern, "*")) {
		t.Errorf("pattern %q matches another tenant's key %q", pattern, name)
	}
}

func TestValidTenantID(t *testing.T) {
	tests := []struct {
		give string
		want bool
	}{
		{"acme", true},
		{"a", true},
		{"team_42-prod", true},
		{strings.Repeat("a", 64), true},
		{"", false},
		{strings.Repeat("a", 65), false},
		{"Acme", false},
		{"ac me", false},
		{"acme:1", false},
		{"ac}me", false},
		{"ac{me", false},
		{"ac*", false},
		{"é", false},
		{"a\x00b", false},
	}
	for _, tt := range tests {
		if got := ValidTenantID(tt.give); got != tt.want {
			t.Errorf("ValidTenantID(%q) = %v, want %v", tt.give, got, tt.want)
		}
	}
}
