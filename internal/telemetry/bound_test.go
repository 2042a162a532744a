package telemetry

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestBoundCutsOnARuneBoundary(t *testing.T) {
	short := strings.Repeat("a", MaxValueLen)
	if got := Bound(short); got != short {
		t.Errorf("Bound of %d bytes changed it", MaxValueLen)
	}
	// "é" is two bytes: an odd prefix puts a rune across the bound.
	long := "a" + strings.Repeat("é", MaxValueLen)
	got := Bound(long)
	if !utf8.ValidString(got) || len(got) != MaxValueLen-1 || !strings.HasPrefix(long, got) {
		t.Errorf("Bound = %d bytes (valid UTF-8: %v); want the %d-byte prefix that ends on a rune", len(got), utf8.ValidString(got), MaxValueLen-1)
	}
}

func TestMethodNamesOnlyHTTPs(t *testing.T) {
	for m, want := range map[string]string{"GET": "GET", "POST": "POST", "PATCH": "PATCH", "get": OtherMethod, "BREW": OtherMethod, "": OtherMethod} {
		if got := Method(m); got != want {
			t.Errorf("Method(%q) = %q; want %q", m, got, want)
		}
	}
}
