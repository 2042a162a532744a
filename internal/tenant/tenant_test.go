package tenant

import (
	"context"
	"fmt"
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

// BenchmarkAuthenticateAPITenants measures the hit path's key lookup with 1 and
// 10,000 API tenants (two keys each): a map lookup by digest, with no
// lock and no allocation, so the count of tenants should not show.
func BenchmarkAuthenticateAPITenants(b *testing.B) {
	for _, n := range []int{1, 10_000} {
		b.Run(fmt.Sprintf("tenants=%d", n), func(b *testing.B) {
			specs := make([]Spec, n)
			for i := range specs {
				id := fmt.Sprintf("t%05d", i)
				specs[i] = Spec{ID: id, Source: SourceAPI, Keys: []Key{
					{ID: "key_a" + id, SHA256: HashKey("sk-a-" + id)},
					{ID: "key_b" + id, SHA256: HashKey("sk-b-" + id), ExpiresAt: time.Now().Add(time.Hour)},
				}}
			}
			r, err := NewRegistry(specs)
			if err != nil {
				b.Fatal(err)
			}
			key := fmt.Sprintf("sk-b-t%05d", n/2)
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, ok := r.Authenticate(key); !ok {
						b.Fatal("key refused")
					}
				}
			})
		})
	}
}

func TestAPIKeysExpireAndMergeUnderTheFile(t *testing.T) {
	file, err := NewRegistry([]Spec{{ID: "acme", KeySHA256: []string{HashKey("sk-file")}, Policy: Policy{MaxLeaders: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	exp := time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC)
	api := []Spec{
		{ID: "acme", Source: SourceAPI, Keys: []Key{{ID: "key_x", SHA256: HashKey("sk-shadowed")}}},
		{ID: "beta", Source: SourceAPI, Keys: []Key{{ID: "key_b", SHA256: HashKey("sk-beta"), ExpiresAt: exp}}},
	}
	r, shadowed, err := file.With(nil, api)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(shadowed, []string{"acme"}) {
		t.Errorf("shadowed = %v; want [acme]", shadowed)
	}
	if _, ok := r.AuthenticateAt("sk-shadowed", exp.Add(-time.Hour)); ok {
		t.Error("an API tenant took the file tenant's id")
	}
	if got, ok := r.AuthenticateAt("sk-beta", exp.Add(-time.Nanosecond)); !ok || got.Source != SourceAPI {
		t.Errorf("beta before expiry: %v %v", got, ok)
	}
	if _, ok := r.AuthenticateAt("sk-beta", exp); ok {
		t.Error("beta's key works at its expiry")
	}
	if used := r.Used(0); !used["key_b"].At.Equal(exp.Add(-time.Minute)) || used["key_b"].Tenant != "beta" {
		t.Errorf("Used = %v; want beta's key_b at the minute before expiry", used)
	}
	// A rebuild keeps an unchanged tenant's value (and semaphore) and its
	// keys' last use.
	r2, _, err := file.With(r, api)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := r.Get("beta")
	b2, _ := r2.Get("beta")
	a1, _ := r.Get("acme")
	a2, _ := r2.Get("acme")
	if b1 != b2 || a1 != a2 {
		t.Error("a rebuild replaced unchanged tenants")
	}
	if len(r2.Used(0)) != 1 {
		t.Error("a rebuild forgot the keys' last use")
	}
}

// BenchmarkWith10kAPITenants measures one rebuild of a registry holding
// 10,000 API tenants, what every change made through the admin API costs
// each instance.
func BenchmarkWith10kAPITenants(b *testing.B) {
	file, err := NewRegistry([]Spec{{ID: "acme", KeySHA256: []string{HashKey("sk-acme")}}})
	if err != nil {
		b.Fatal(err)
	}
	specs := make([]Spec, 10_000)
	for i := range specs {
		id := fmt.Sprintf("t%05d", i)
		specs[i] = Spec{ID: id, Source: SourceAPI, Doc: []byte(`{"requests_per_minute":600}`), Policy: Policy{RequestsPerMinute: 600, Models: []string{"gpt-4o-mini"}},
			Keys: []Key{{ID: "key_a" + id, SHA256: HashKey("sk-a-" + id)}}}
	}
	prev, _, err := file.With(nil, specs)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		next, _, err := file.With(prev, specs)
		if err != nil {
			b.Fatal(err)
		}
		prev = next
	}
}

// TestScope: a file tenant's data is kept under its id, an API tenant's
// under its id and generation, and either gives back its id.
func TestScope(t *testing.T) {
	tests := []struct {
		give       Spec
		wantScope  string
		wantIDBack string
	}{
		{Spec{ID: "acme"}, "acme", "acme"},
		{Spec{ID: "acme", Source: SourceAPI, Generation: "0a1b2c3d4e5f"}, "acme.0a1b2c3d4e5f", "acme"},
		{Spec{ID: "team-x_2", Source: SourceAPI}, "team-x_2", "team-x_2"},
	}
	for _, tt := range tests {
		r, err := NewRegistry([]Spec{tt.give})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r.Get(tt.give.ID)
		if got.Scope != tt.wantScope || IDOfScope(got.Scope) != tt.wantIDBack {
			t.Errorf("%+v: scope %q (id %q); want %q (id %q)", tt.give, got.Scope, IDOfScope(got.Scope), tt.wantScope, tt.wantIDBack)
		}
	}
}
