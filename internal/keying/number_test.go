package keying

import (
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
		{"1e-99999999999999999999", "1e-99999999999999999999"},
		{"123e99999999999999999999", "1.23e100000000000000000001"},
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
