package mockllm

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func FuzzSplit(f *testing.F) {
	f.Add("mock reply to: hello", 5)
	f.Add("", 3)
	f.Add("ab", 7)
	f.Add("héllo ✓ 🙂", 4)
	f.Add("bad \xff", 2)
	f.Fuzz(func(t *testing.T, s string, n int) {
		n = n%1000 + 1
		if n < 1 {
			n += 1000
		}
		pieces := split(s, n)
		if got := strings.Join(pieces, ""); got != s {
			t.Fatalf("split(%q, %d) joins to %q", s, n, got)
		}
		want := max(min(n, utf8.RuneCountInString(s)), 1)
		if len(pieces) != want {
			t.Errorf("split(%q, %d) gave %d pieces, want %d", s, n, len(pieces), want)
		}
		for _, p := range pieces {
			if s != "" && p == "" {
				t.Errorf("split(%q, %d) has an empty piece", s, n)
			}
			if utf8.ValidString(s) && !utf8.ValidString(p) {
				t.Errorf("split(%q, %d) cut a rune: %q", s, n, p)
			}
		}
	})
}

func TestWordCount(t *testing.T) {
	tests := []struct {
		give string
		want int
	}{
		{"", 0},
		{"   ", 0},
		{"one", 1},
		{" two  words ", 2},
		{"tab\tnew\nline", 3},
		{"non\u00a0breaking", 2},
	}
	for _, tt := range tests {
		if got := wordCount(tt.give); got != tt.want {
			t.Errorf("wordCount(%q) = %d, want %d", tt.give, got, tt.want)
		}
		if got := len(strings.Fields(tt.give)); got != tt.want {
			t.Errorf("strings.Fields(%q) has %d words, want %d: wordCount must agree with it", tt.give, got, tt.want)
		}
	}
}
