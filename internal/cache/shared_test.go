package cache

import (
	"bytes"
	"context"
	"net/http"
	"reflect"
	"runtime"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

// TestRedisSharesLargeEntries: readers of one large stored value get one
// entry, by Get, GetMany and UnmarshalShared alike, so clients of a large
// answer do not each hold a copy (issue 33 point 18). A changed value is
// never answered with the entry of the old one, even when only its last
// byte or a header differs.
func TestRedisSharesLargeEntries(t *testing.T) {
	rdb := redistest.Client(t)
	s := NewRedis(rdb, RedisOptions{})
	ctx := context.Background()
	key := testKey("shared", "r")
	big := fullEntry(newFakeClock())
	big.Body = bytes.Repeat([]byte("0123456789abcdef"), shareMin/16+1)
	mustSet(t, s, key, big, time.Minute)

	first, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	many, err := s.GetMany(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := rdb.Get(ctx, key).Bytes()
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := UnmarshalShared(key, raw)
	if err != nil {
		t.Fatal(err)
	}
	if again != first || many[0] != first || decoded != first {
		t.Errorf("readers of one value got different entries (%p, %p, %p, %p); want one shared", first, again, many[0], decoded)
	}

	changed := *big
	changed.Body = bytes.Clone(big.Body)
	changed.Body[len(changed.Body)-1] = 'X'
	mustSet(t, s, key, &changed, time.Minute)
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got == first || !bytes.Equal(got.Body, changed.Body) {
		t.Errorf("after the value changed its last byte, Get answered the old entry")
	}

	header := changed
	header.Header = http.Header{"Content-Type": {"application/json"}, "Openai-Version": {"2024-01-01"}}
	mustSet(t, s, key, &header, time.Minute)
	got2, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got2 == got || got2.Header.Get("Openai-Version") != "2024-01-01" {
		t.Errorf("after a header changed, Get answered Openai-Version %q; want the new entry's", got2.Header.Get("Openai-Version"))
	}
	runtime.KeepAlive(first)
	runtime.KeepAlive(got)
}

// TestSharedEntriesAreForgotten: the table keeps no entry alive and drops
// a slot once its entry is collected, so it holds no more slots than
// entries in memory.
func TestSharedEntriesAreForgotten(t *testing.T) {
	key := testKey("forgotten", "r")
	e := fullEntry(newFakeClock())
	e.Body = bytes.Repeat([]byte("x"), shareMin)
	if _, err := UnmarshalShared(key, Marshal(e)); err != nil {
		t.Fatal(err)
	}
	slot := func() bool {
		decoded.mu.Lock()
		defer decoded.mu.Unlock()
		_, ok := decoded.m[key]
		return ok
	}
	// The clean-up runs on the runtime's own goroutine after a collection.
	for deadline := time.Now().Add(10 * time.Second); slot(); runtime.Gosched() {
		if time.Now().After(deadline) {
			t.Fatal("the slot of a collected entry is still in the table")
		}
		runtime.GC()
	}
}

// TestSameEntryComparesEveryField: an entry is shared only with one equal
// in every field. A field added to Entry fails here until sameEntry (and
// this test's mutate) know it.
func TestSameEntryComparesEveryField(t *testing.T) {
	base := fullEntry(newFakeClock())
	base.Model = "gpt-4o-mini"
	if !sameEntry(base, &Entry{Status: base.Status, Header: base.Header.Clone(), Body: bytes.Clone(base.Body),
		StoredAt: base.StoredAt, TTL: base.TTL, PromptTokens: base.PromptTokens, CompletionTokens: base.CompletionTokens,
		Model: base.Model}) {
		t.Fatal("sameEntry of two equal entries is false")
	}
	typ := reflect.TypeFor[Entry]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			other := *base
			other.Header = base.Header.Clone()
			v := reflect.ValueOf(&other).Elem().Field(i)
			switch x := v.Addr().Interface().(type) {
			case *int:
				*x++
			case *time.Duration:
				*x++
			case *string:
				*x += "x"
			case *[]byte:
				*x = append(bytes.Clone(*x), 'x')
			case *http.Header:
				x.Add("X-Other", "1")
			case *time.Time:
				*x = x.Add(time.Nanosecond)
			case *bool:
				*x = !*x
			default:
				t.Fatalf("field %s (%s): teach sameEntry and this test to compare it", f.Name, f.Type)
			}
			if sameEntry(base, &other) {
				t.Errorf("entries that differ in %s are the same to sameEntry", f.Name)
			}
		})
	}
}
