package cache

import (
	"context"
	"slices"
	"testing"

	"github.com/corralhq/corral/internal/redistest"
)

var globKeys = []string{
	"corral:v1:{acme:00ff}:r",
	"corral:v1:{acme:00ff}:n",
	"corral:v1:{acme2:00ff}:r",
	"corral:v1:{acme}:r",
	"abc", "abd", "a", "ab", "ac", "b", "]", "[", "*x", "?x", "\\x", "a*x", "aXc", "a-c", "^b",
	"", "x/y/z", "ABC",
}

var globPatterns = []string{
	"corral:v1:{acme:*",
	"corral:v1:{acme*",
	"corral:v1:{acme:*:r",
	"*:r",
	"*", "**", "***a*", "a*", "*c", "a?c", "?", "??",
	"[ab]*", "[^a]*", "[a-c]", "[c-a]", "[a-]", "[-a]", "[\\]]", "[]]", "[^]",
	"[abc", "[", "a[", "\\*x", "\\?x", "\\\\x", "a\\", "\\",
	"a[*]x", "x/*", "x*z", "*/*", "abc*", "ABC", "[A-Z]*",
}

func TestMatchGlob(t *testing.T) {
	tests := []struct {
		give    string
		pattern string
		want    bool
	}{
		{"corral:v1:{acme:00ff}:r", "corral:v1:{acme:*", true},
		{"corral:v1:{acme2:00ff}:r", "corral:v1:{acme:*", false},
		{"corral:v1:{acme2:00ff}:r", "corral:v1:{acme*", true},
		{"x/y/z", "x*z", true}, // no separators, unlike path.Match
		{"*x", "\\*x", true},
		{"ax", "\\*x", false},
		{"b", "[^a]", true},
		{"b", "[c-a]", true},
		{"ABC", "abc", false},
		{"", "*", true},
	}
	for _, tt := range tests {
		if got := matchGlob(tt.pattern, tt.give); got != tt.want {
			t.Errorf("matchGlob(%q, %q) = %v, want %v", tt.pattern, tt.give, got, tt.want)
		}
	}
}

// TestMatchGlobAgreesWithRedis: Memory.DeletePattern must remove exactly what
// Redis.DeletePattern would, so matchGlob is checked against SCAN MATCH on a
// real redis-server for every pattern and key above. The empty pattern is
// not among them: go-redis sends no MATCH for it, so SCAN returns every key;
// DeletePattern refuses it in both stores.
func TestMatchGlobAgreesWithRedis(t *testing.T) {
	rdb := redistest.Start(t).Client()
	ctx := context.Background()
	for _, k := range globKeys {
		if err := rdb.Set(ctx, k, "1", 0).Err(); err != nil {
			t.Fatalf("SET %q: %v", k, err)
		}
	}
	for _, p := range globPatterns {
		var want []string
		iter := rdb.Scan(ctx, 0, p, 1000).Iterator()
		for iter.Next(ctx) {
			want = append(want, iter.Val())
		}
		if err := iter.Err(); err != nil {
			t.Fatalf("SCAN MATCH %q: %v", p, err)
		}
		var got []string
		for _, k := range globKeys {
			if matchGlob(p, k) {
				got = append(got, k)
			}
		}
		slices.Sort(want)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("pattern %q: matchGlob matches %q, Redis %q", p, got, want)
		}
	}
}

func FuzzMatchGlob(f *testing.F) {
	for _, p := range globPatterns {
		f.Add(p, "corral:v1:{acme:00ff}:r")
	}
	f.Fuzz(func(t *testing.T, pattern, s string) {
		_ = matchGlob(pattern, s) // must not panic or hang
		if !matchGlob(s, s) && !hasGlobMeta(s) {
			t.Errorf("a pattern without metacharacters must match itself: %q", s)
		}
	})
}

func hasGlobMeta(s string) bool {
	for _, c := range []byte(s) {
		switch c {
		case '*', '?', '[', '\\':
			return true
		}
	}
	return false
}
