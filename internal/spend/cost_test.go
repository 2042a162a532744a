package spend

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

// catalog is the prices the cost table uses (nano-dollars per token =
// USD per million tokens × 1000).
var catalog = NewCatalog([]Price{
	{Model: "gpt-4o-mini*", Input: 150, CachedInput: 75, CacheWrite: 150, Output: 600},
	{Model: "gpt-4o*", Input: 2500, CachedInput: 1250, CacheWrite: 2500, Output: 10000},
	{Model: "claude-sonnet-4*", Input: 3000, CachedInput: 300, CacheWrite: 3750, Output: 15000},
	{Model: "text-embedding-3-small", Input: 20, CachedInput: 20, CacheWrite: 20, Output: 0},
})

func TestCost(t *testing.T) {
	tests := []struct {
		name   string
		give   Usage
		want   Nanodollars
		priced bool
	}{
		// 1000 prompt tokens of which 400 cached, 200 completion:
		// 600×150 + 400×75 + 200×600 = 90,000 + 30,000 + 120,000.
		{"chat with cached input", Usage{Model: "gpt-4o-mini-2024-07-18", Input: 1000, CachedInput: 400, Output: 200}, 240_000, true},
		// First glob wins: gpt-4o-mini is not priced as gpt-4o.
		{"first match wins", Usage{Model: "gpt-4o-mini", Input: 1_000_000}, 150 * 1_000_000, true},
		// 10 input × 2500 + 5 output × 10000 = 25,000 + 50,000.
		{"gpt-4o", Usage{Model: "gpt-4o-2024-08-06", Input: 10, Output: 5}, 75_000, true},
		// Messages: input_tokens 50, cache_read 2000, cache_creation 1000,
		// output 300 → Input 3050: 50×3000 + 2000×300 + 1000×3750 + 300×15000
		// = 150,000 + 600,000 + 3,750,000 + 4,500,000.
		{"messages with cache reads and writes", Usage{Model: "claude-sonnet-4-5-20250929", Input: 3050, CachedInput: 2000, CacheWrite: 1000, Output: 300}, 9_000_000, true},
		// 8 tokens × 20.
		{"embeddings", Usage{Model: "text-embedding-3-small", Input: 8}, 160, true},
		{"unpriced", Usage{Model: "llama-3", Input: 1000, Output: 1000}, 0, false},
		{"no model", Usage{Input: 1000}, 0, false},
		// Cached beyond the input is clamped to it: 100 cached × 75.
		{"cached over input", Usage{Model: "gpt-4o-mini", Input: 100, CachedInput: 500}, 7_500, true},
		{"negative counts", Usage{Model: "gpt-4o-mini", Input: -5, Output: -1}, 0, true},
		// Clamped to MaxTokens each: no wrap-around with the dearest price.
		{"huge counts", Usage{Model: "gpt-4o", Input: 1 << 62, Output: 1 << 62}, MaxTokens*2500 + MaxTokens*10000, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, priced := catalog.Cost(tt.give)
			if got != tt.want || priced != tt.priced {
				t.Errorf("Cost(%+v) = %d (%s), %v; want %d (%s), %v", tt.give, got, got, priced, tt.want, tt.want, tt.priced)
			}
		})
	}
}

// TestCostSumsNeverDrift: the sum of many answers' costs equals the cost of
// their summed usage, to the nano-dollar, in any order; a float would not.
func TestCostSumsNeverDrift(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := Price{Model: "m", Input: 150, CachedInput: 75, CacheWrite: 187, Output: 600}
	var total Usage
	var sum, reverse Nanodollars
	var each []Nanodollars
	for range 100_000 {
		in := r.IntN(5000)
		u := Usage{Input: in, CachedInput: r.IntN(in + 1)}
		u.CacheWrite = r.IntN(in - u.CachedInput + 1)
		u.Output = r.IntN(2000)
		c := p.Cost(u)
		each = append(each, c)
		sum += c
		total.Input += u.Input
		total.CachedInput += u.CachedInput
		total.CacheWrite += u.CacheWrite
		total.Output += u.Output
	}
	for i := len(each) - 1; i >= 0; i-- {
		reverse += each[i]
	}
	if want := p.Cost(total); sum != want || reverse != want {
		t.Fatalf("sum of costs %d, reversed %d; cost of the summed usage %d", sum, reverse, want)
	}
}

func FuzzCostAdditive(f *testing.F) {
	f.Add(1000, 400, 0, 200, 50, 10, 5, 7)
	f.Fuzz(func(t *testing.T, in1, c1, w1, o1, in2, c2, w2, o2 int) {
		clamp := func(n int) int { return min(max(n, 0), MaxTokens/2) }
		a := Usage{Input: clamp(in1), Output: clamp(o1)}
		a.CachedInput = min(clamp(c1), a.Input)
		a.CacheWrite = min(clamp(w1), a.Input-a.CachedInput)
		b := Usage{Input: clamp(in2), Output: clamp(o2)}
		b.CachedInput = min(clamp(c2), b.Input)
		b.CacheWrite = min(clamp(w2), b.Input-b.CachedInput)
		p := Price{Input: 3000, CachedInput: 300, CacheWrite: 3750, Output: 15000}
		ab := Usage{Input: a.Input + b.Input, CachedInput: a.CachedInput + b.CachedInput, CacheWrite: a.CacheWrite + b.CacheWrite, Output: a.Output + b.Output}
		if got, want := p.Cost(a)+p.Cost(b), p.Cost(ab); got != want || got < 0 {
			t.Fatalf("Cost(a)+Cost(b) = %d, Cost(a+b) = %d", got, want)
		}
	})
}

func TestLookupMemoBounded(t *testing.T) {
	c := NewCatalog([]Price{{Model: "gpt-*", Input: 1}})
	for i := range memoMax + 100 {
		c.Lookup("client-model-" + strconv.Itoa(i))
	}
	if n := c.memoN.Load(); n > memoMax {
		t.Fatalf("memo holds %d names, want at most %d", n, memoMax)
	}
	if _, ok := c.Lookup("gpt-5"); !ok {
		t.Fatal("gpt-5 not priced once the memo is full")
	}
	if got := c.Label("anything-else"); got != OtherModel {
		t.Fatalf("Label = %q, want %q", got, OtherModel)
	}
	if got := c.Label("gpt-5"); got != "gpt-*" {
		t.Fatalf("Label = %q, want the catalog's glob", got)
	}
}

func ExampleCatalog_Cost() {
	c := NewCatalog([]Price{{Model: "gpt-4o-mini*", Input: 150, CachedInput: 75, CacheWrite: 150, Output: 600}})
	cost, _ := c.Cost(Usage{Model: "gpt-4o-mini-2024-07-18", Input: 1000, CachedInput: 400, Output: 200})
	fmt.Println(cost)
	// Output: $0.00024
}

// TestLabelBoundsTheModelSeries: 10,000 distinct client model names map to
// the catalog's names or "other", so the metrics' model label stays bounded.
func TestLabelBoundsTheModelSeries(t *testing.T) {
	labels := map[string]bool{}
	for i := range 10_000 {
		labels[catalog.Label("gpt-4o-mini-client-"+strconv.Itoa(i))] = true
		labels[catalog.Label("invented-"+strconv.Itoa(i))] = true
	}
	if len(labels) > catalog.Len()+1 {
		t.Fatalf("%d distinct labels: %v; want at most the catalog's %d names and other", len(labels), labels, catalog.Len())
	}
}
