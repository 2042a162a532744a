package tenant

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestAuthenticate(t *testing.T) {
	r, err := NewRegistry([]Spec{
		{ID: "acme", KeySHA256: []string{HashKey("sk-acme-1"), HashKey("sk-acme-2")}, Policy: Policy{MaxLeaders: 2}},
		{ID: "beta", KeySHA256: []string{HashKey("sk-beta")}, Policy: Policy{Models: []string{"b", "a", "a"}}},
	})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	tests := []struct {
		give   string
		wantID string
	}{
		{"sk-acme-1", "acme"},
		{"sk-acme-2", "acme"},
		{"sk-beta", "beta"},
		{"sk-acme-", ""},
		{"", ""},
		{HashKey("sk-acme-1"), ""}, // the digest itself is not a key
	}
	for _, tt := range tests {
		got, ok := r.Authenticate(tt.give)
		gotID := ""
		if ok {
			gotID = got.ID
		}
		if gotID != tt.wantID {
			t.Errorf("Authenticate(%q) = %q; want %q", tt.give, gotID, tt.wantID)
		}
	}
	beta, _ := r.Get("beta")
	if !beta.Allows("a") || !beta.Allows("b") || beta.Allows("c") || len(beta.Models) != 2 {
		t.Errorf("beta allow-list = %v", beta.Models)
	}
	acme, _ := r.Get("acme")
	if !acme.Allows("anything") {
		t.Error("tenant without allow-list refuses a model")
	}
	if !acme.Leaders.TryAcquire(2) || acme.Leaders.TryAcquire(1) {
		t.Error("acme leader semaphore does not hold exactly 2 permits")
	}
}

// TestNewRegistryNormalisesPolicy pins what NewRegistry does to the Policy
// it copies: the rest arrives unchanged.
func TestNewRegistryNormalisesPolicy(t *testing.T) {
	models := []string{"b", "a", "b"}
	give := Policy{RequestsPerMinute: 60, TokensPerMinute: 1000, MaxLeaders: 0, Models: models,
		CacheTTL: time.Hour, NegativeTTL: time.Minute, StaleWhileRevalidate: -time.Second, StaleIfError: 2 * time.Minute,
		Cache: true, DenyObjects: true}
	r, err := NewRegistry([]Spec{{ID: "p", Policy: give}, {ID: "none", Policy: Policy{Models: []string{}}}})
	if err != nil {
		t.Fatalf("NewRegistry: %v", err)
	}
	got, _ := r.Get("p")
	want := give
	want.MaxLeaders, want.StaleWhileRevalidate, want.Models = 1, 0, []string{"a", "b"}
	if diff := cmp.Diff(want, got.Policy); diff != "" {
		t.Errorf("Policy (-want +got):\n%s", diff)
	}
	if !slices.Equal(models, []string{"b", "a", "b"}) {
		t.Errorf("NewRegistry changed the spec's models to %v", models)
	}
	none, _ := r.Get("none")
	if none.Models == nil || none.Allows("a") {
		t.Errorf("an empty allow-list became %#v, which allows every model", none.Models)
	}
}

func TestNewRegistryRejectsDuplicates(t *testing.T) {
	if _, err := NewRegistry([]Spec{{ID: "a", KeySHA256: []string{HashKey("k")}}, {ID: "b", KeySHA256: []string{HashKey("k")}}}); err == nil {
		t.Error("duplicate digest accepted")
	}
	if _, err := NewRegistry([]Spec{{ID: "a"}, {ID: "a"}}); err == nil {
		t.Error("duplicate id accepted")
	}
	if _, err := NewRegistry([]Spec{{ID: "a", KeySHA256: []string{"xyz"}}}); err == nil {
		t.Error("bad digest accepted")
	}
}

func TestContext(t *testing.T) {
	if _, ok := FromContext(context.Background()); ok {
		t.Error("FromContext(empty) found a tenant")
	}
	want := &Tenant{ID: "acme"}
	got, ok := FromContext(NewContext(context.Background(), want))
	if !ok || got != want {
		t.Errorf("FromContext = %v, %v", got, ok)
	}
}

func BenchmarkAuthenticate(b *testing.B) {
	r, _ := NewRegistry([]Spec{{ID: "acme", KeySHA256: []string{HashKey("sk-acme-0123456789abcdef")}}})
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := r.Authenticate("sk-acme-0123456789abcdef"); !ok {
			b.Fatal("not found")
		}
	}
}
