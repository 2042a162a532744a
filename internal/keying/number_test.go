package keying

import (
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
)

// canonicalNumber returns the canonical text of the JSON number s.
func canonicalNumber(t *testing.T, s string) string {
	t.Helper()
	out, err := Canonical([]byte(`{"x":` + s + `}`))
	if err != nil {
		t.Fatalf("Canonical(%s): %v", s, err)
	}
	return strings.TrimSuffix(strings.TrimPrefix(string(out), `{"x":`), "}")
}

// spellings returns ways to write ±d×10^e, d a digit string with no leading
// or trailing zeros.
func spellings(neg bool, d string, e int) []string {
	sign := ""
	if neg {
		sign = "-"
	}
	var out []string
	// Move the decimal point to every place in d, padded with zeros, and
	// adjust the exponent to match.
	padded := "000" + d + "000"
	for p := 0; p <= len(padded); p++ {
		intPart, frac := padded[:p], padded[p:]
		intPart = strings.TrimLeft(intPart, "0")
		if intPart == "" {
			intPart = "0"
		}
		// padded is d×10^3; a point after p digits divides it by
		// 10^(len(padded)-p), which the exponent puts back.
		exp := e - 3 + len(padded) - p
		m := intPart
		if frac != "" {
			m += "." + frac
		}
		out = append(out, fmt.Sprintf("%s%se%d", sign, m, exp), fmt.Sprintf("%s%sE%+d", sign, m, exp))
	}
	if e >= 0 {
		out = append(out, sign+d+strings.Repeat("0", e))
	}
	return out
}

func TestNumberSpellingsAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		k := 1 + rng.IntN(30)
		var b strings.Builder
		for i := range k {
			lo := 0
			if i == 0 || i == k-1 {
				lo = 1 // no leading or trailing zero
			}
			b.WriteByte(byte('0' + lo + rng.IntN(10-lo)))
		}
		d := b.String()
		e := rng.IntN(80) - 40
		neg := rng.IntN(2) == 0
		want := new(big.Rat)
		want.SetString(fmt.Sprintf("%se%d", d, e))
		if neg {
			want.Neg(want)
		}

		var first string
		for _, s := range spellings(neg, d, e) {
			got := canonicalNumber(t, s)
			if first == "" {
				first = got
			}
			if got != first {
				t.Fatalf("%s canonicalises to %s, but an equal spelling gives %s", s, got, first)
			}
		}
		if got, ok := new(big.Rat).SetString(first); !ok || got.Cmp(want) != 0 {
			t.Fatalf("canonical %s for %se%d (neg %v) has another value", first, d, e, neg)
		}
		if again := canonicalNumber(t, first); again != first {
			t.Fatalf("canonical %s is not a fixed point: %s", first, again)
		}
	}
}

func TestNumberReference(t *testing.T) {
	tests := []struct {
		give string
		want string
	}{
		{"0", "0"},
		{"-0.000e-7", "0"},
		{"123", "123"},
		{"1e21", "1000000000000000000000"},
		{"1e22", "1e22"},
		{"1.5e-6", "0.0000015"},
		{"1.5e-7", "1.5e-7"},
		{"-98765.4321e-3", "-98.7654321"},
		{"1e-999999999999999999", "1e-999999999999999999"},
		{"123e999999999999999990", "1.23e999999999999999992"},
	}
	for _, tt := range tests {
		if got := canonicalNumber(t, tt.give); got != tt.want {
			t.Errorf("canonical %s = %s, want %s", tt.give, got, tt.want)
		}
		if got := refNumber(tt.give); got != tt.want {
			t.Errorf("refNumber(%s) = %s, want %s", tt.give, got, tt.want)
		}
	}
}

func TestNumberExponentBound(t *testing.T) {
	tests := []struct {
		give string
		ok   bool
	}{
		{"1e999999999999999999", true},     // 18 digits: the longest accepted
		{"1e-999999999999999999", true},    // and negative
		{"1e0000999999999999999999", true}, // leading zeros do not count
		{"1e1000000000000000000", false},   // 19 digits
		{"0e1000000000000000000", false},   // even for zero
		{"1e" + strings.Repeat("9", 1<<20), false},
	}
	for _, tt := range tests {
		_, err := Parse("acme", chatEndpoint, []byte(`{"seed":`+tt.give+`}`))
		if got := err == nil; got != tt.ok {
			t.Errorf("Parse(seed %.40s) error %v, want accepted %v", tt.give, err, tt.ok)
		}
		if !tt.ok && (!errors.Is(err, ErrNumberOutOfRange) || !errors.Is(err, ErrInvalidJSON)) {
			t.Errorf("Parse(seed %.40s) error %v, want ErrNumberOutOfRange and ErrInvalidJSON", tt.give, err)
		}
	}
}
