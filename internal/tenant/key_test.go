package tenant

import (
	"encoding/base64"
	"strings"
	"testing"
)

// A new key carries KeyPrefix and 32 random bytes, and is never the same
// twice; a listing shows its first 12 characters only.
func TestNewKeyAndShownPrefix(t *testing.T) {
	a, b := NewKey(), NewKey()
	if a == b {
		t.Fatalf("two keys alike: %q", a)
	}
	raw, ok := strings.CutPrefix(a, KeyPrefix)
	if !ok {
		t.Fatalf("key %q does not start with %q", a, KeyPrefix)
	}
	if b, err := base64.RawURLEncoding.DecodeString(raw); err != nil || len(b) != 32 {
		t.Fatalf("key's random part %q: %d bytes, %v; want 32 bytes of URL-safe base64", raw, len(b), err)
	}
	if got := ShownPrefix(a); got != a[:12] || !strings.HasPrefix(got, KeyPrefix) {
		t.Fatalf("ShownPrefix(%q) = %q, want its first 12 characters", a, got)
	}
}
