package cache

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestCodecRoundtrip(t *testing.T) {
	tests := []struct {
		name string
		give *Entry
	}{
		{"zero entry", &Entry{}},
		{"full", fullEntry(newFakeClock())},
		{"negative", &Entry{
			Status: 400,
			Header: http.Header{"Content-Type": {"application/json"}},
			Body:   []byte(`{"error":{"message":"bad","type":"invalid_request_error","param":null,"code":null}}`),
			TTL:    30 * time.Second,
		}},
		{"multi-valued and empty headers", &Entry{
			Status: 200,
			Header: http.Header{"A": {"1", "", "3"}, "B": {}, "": {"x"}},
			Body:   []byte{0, 1, 2, 0xff},
		}},
		{"extreme numbers", &Entry{
			Status:           -1,
			Body:             []byte("x"),
			StoredAt:         time.Unix(0, -1),
			TTL:              -time.Nanosecond,
			PromptTokens:     1 << 30,
			CompletionTokens: -(1 << 30),
		}},
		{"64 KiB body", &Entry{Status: 200, Body: bytes.Repeat([]byte{'z'}, 64<<10)}},
		{"cache reads, writes and model", &Entry{
			Status: 200, Body: []byte("{}"), PromptTokens: 3050, CompletionTokens: 300,
			CachedTokens: 2000, CacheWriteTokens: 1000, Model: "claude-sonnet-4-5-20250929",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Unmarshal(Marshal(tt.give))
			if err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.give, got, equateEmptyHeader); diff != "" {
				t.Errorf("roundtrip (-want +got):\n%s", diff)
			}
		})
	}
}

// equateEmptyHeader treats a nil and an empty header as equal: Unmarshal
// returns nil for no headers.
var equateEmptyHeader = cmp.Transformer("header", func(h http.Header) map[string][]string {
	if len(h) == 0 {
		return nil
	}
	return h
})

// TestUnmarshalReadsV1: entries stored before v2 keep serving, with no
// cached tokens and no model.
func TestUnmarshalReadsV1(t *testing.T) {
	b := []byte{codecV1}
	for _, v := range []int64{200, 0, int64(time.Minute), 12, 5} { // status, stored at, TTL, tokens
		b = binary.AppendVarint(b, v)
	}
	b = binary.AppendUvarint(b, 0) // no headers
	b = binary.AppendUvarint(b, 2)
	b = append(b, "{}"...)
	got, err := Unmarshal(b)
	if err != nil {
		t.Fatal(err)
	}
	want := &Entry{Status: 200, TTL: time.Minute, PromptTokens: 12, CompletionTokens: 5, Body: []byte("{}")}
	if diff := cmp.Diff(want, got, equateEmptyHeader); diff != "" {
		t.Errorf("v1 entry (-want +got):\n%s", diff)
	}
}

func TestCodecBodyAliasesInputWithoutSpareCapacity(t *testing.T) {
	data := Marshal(&Entry{Body: []byte("abc")})
	e, err := Unmarshal(data)
	if err != nil {
		t.Fatal(err)
	}
	_ = append(e.Body, '!') // must reallocate, not write into data
	if cap(e.Body) != len(e.Body) {
		t.Errorf("cap(Body) = %d, want %d", cap(e.Body), len(e.Body))
	}
}

func TestUnmarshalCorrupt(t *testing.T) {
	valid := Marshal(fullEntry(newFakeClock()))
	tests := []struct {
		name string
		give []byte
	}{
		{"nil", nil},
		{"unknown version", append([]byte{0xC3}, valid[1:]...)},
		{"JSON", []byte(`{"status":200}`)},
		{"only the version", []byte{codecV1}},
		{"truncated in the fixed fields", valid[:4]},
		{"truncated in the headers", valid[:25]},
		{"truncated in the body", valid[:len(valid)-1]},
		{"trailing byte", append(append([]byte(nil), valid...), 0)},
		{"overlong varint", []byte{codecV1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}},
		{"huge header count", []byte{codecV1, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
		{"huge body length", []byte{codecV1, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e, err := Unmarshal(tt.give)
			if !errors.Is(err, ErrCorrupt) || e != nil {
				t.Fatalf("Unmarshal = %+v, %v; want nil, ErrCorrupt", e, err)
			}
		})
	}
}

// FuzzUnmarshal: any input either fails with ErrCorrupt or decodes to an
// entry that survives another roundtrip unchanged; nothing panics.
func FuzzUnmarshal(f *testing.F) {
	f.Add(Marshal(fullEntry(newFakeClock())))
	f.Add(Marshal(&Entry{}))
	f.Add(Marshal(&Entry{Header: http.Header{"A": {"1", "2"}, "B": nil}, Body: []byte{0}}))
	f.Add([]byte{})
	f.Add([]byte{codecV1, 0x80})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Unmarshal(data)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) || e != nil {
				t.Fatalf("Unmarshal = %+v, %v; want nil, ErrCorrupt", e, err)
			}
			return
		}
		again, err := Unmarshal(Marshal(e))
		if err != nil {
			t.Fatalf("re-Unmarshal: %v", err)
		}
		if diff := cmp.Diff(e, again, equateEmptyHeader); diff != "" {
			t.Fatalf("second roundtrip (-first +second):\n%s", diff)
		}
	})
}

func benchEntry() *Entry {
	return &Entry{
		Status:           200,
		Header:           http.Header{"Content-Type": {"application/json"}, "Openai-Version": {"2020-10-01"}},
		Body:             bytes.Repeat([]byte(`{"k":"0123456789abc"}`), 2048/21+1)[:2048],
		StoredAt:         time.Now(),
		TTL:              time.Hour,
		PromptTokens:     512,
		CompletionTokens: 256,
	}
}

func BenchmarkMarshal2KiB(b *testing.B) {
	e := benchEntry()
	b.ReportAllocs()
	b.SetBytes(int64(len(e.Body)))
	for b.Loop() {
		_ = Marshal(e)
	}
}

func BenchmarkUnmarshal2KiB(b *testing.B) {
	data := Marshal(benchEntry())
	b.ReportAllocs()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Unmarshal(data); err != nil {
			b.Fatal(err)
		}
	}
}
