package cache

import (
	"encoding/binary"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// codecV1 and codecV2 are the first byte of an encoded entry: a magic
// number and the format version in one. A value starting with anything
// else is ErrCorrupt, which is also how a future version looks to this
// code. Marshal writes v2; Unmarshal reads both, so entries stored before
// v2 keep serving (their cached tokens and model are unknown: zero and "").
//
// Format v1, after the byte (varint = zig-zag signed, uvarint = unsigned,
// both as in encoding/binary; str = uvarint length + bytes):
//
//	varint   Status
//	varint   StoredAt as Unix nanoseconds (0 = zero time)
//	varint   TTL in nanoseconds
//	varint   PromptTokens
//	varint   CompletionTokens
//	uvarint  number of header names, then per name (sorted):
//	           str name, uvarint number of values, str per value
//	str      Body (raw bytes)
//
// Format v2 is v1 with three fields after CompletionTokens:
//
//	varint   CachedTokens
//	varint   CacheWriteTokens
//	str      Model
//
// Nothing may follow the body. A varint-encoded Status and token counts take
// 2-3 bytes each, so a typical entry costs about 30 bytes plus its header
// strings over its body; JSON with a base64 body would cost a third more.
const (
	codecV1 byte = 0xC1
	codecV2 byte = 0xC2
)

// Marshal encodes e in the current format. A zero StoredAt round-trips; so
// does the Unix epoch itself, which decodes as the zero time.
func Marshal(e *Entry) []byte {
	names := make([]string, 0, len(e.Header))
	size := 1 + 8*binary.MaxVarintLen64 + len(e.Model) + binary.MaxVarintLen64 // fixed fields + header count
	for name, vs := range e.Header {
		names = append(names, name)
		size += 2*binary.MaxVarintLen64 + len(name)
		for _, v := range vs {
			size += binary.MaxVarintLen64 + len(v)
		}
	}
	slices.Sort(names)
	size += binary.MaxVarintLen64 + len(e.Body)

	b := make([]byte, 0, size)
	b = append(b, codecV2)
	b = binary.AppendVarint(b, int64(e.Status))
	var storedAt int64
	if !e.StoredAt.IsZero() {
		storedAt = e.StoredAt.UnixNano()
	}
	b = binary.AppendVarint(b, storedAt)
	b = binary.AppendVarint(b, int64(e.TTL))
	b = binary.AppendVarint(b, int64(e.PromptTokens))
	b = binary.AppendVarint(b, int64(e.CompletionTokens))
	b = binary.AppendVarint(b, int64(e.CachedTokens))
	b = binary.AppendVarint(b, int64(e.CacheWriteTokens))
	b = appendString(b, e.Model)
	b = binary.AppendUvarint(b, uint64(len(names)))
	for _, name := range names {
		b = appendString(b, name)
		vs := e.Header[name]
		b = binary.AppendUvarint(b, uint64(len(vs)))
		for _, v := range vs {
			b = appendString(b, v)
		}
	}
	b = binary.AppendUvarint(b, uint64(len(e.Body)))
	return append(b, e.Body...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Unmarshal decodes data written by Marshal. Any malformed input, including
// an unknown version, yields an error matching ErrCorrupt; it never panics
// and never allocates more than a small multiple of len(data).
//
// The returned Body (nil when empty) aliases data (capacity-limited, so appending to it
// cannot overwrite data): the caller must not modify data afterwards. Header
// strings are copies.
func Unmarshal(data []byte) (*Entry, error) {
	d := decoder{buf: data}
	if len(data) == 0 {
		return nil, corrupt("empty value")
	}
	v := d.byte()
	if v != codecV1 && v != codecV2 {
		return nil, corrupt(fmt.Sprintf("unknown version byte 0x%02x", v))
	}
	e := &Entry{
		Status: d.int(),
	}
	if ns := d.varint(); ns != 0 {
		e.StoredAt = time.Unix(0, ns)
	}
	e.TTL = time.Duration(d.varint())
	e.PromptTokens = d.int()
	e.CompletionTokens = d.int()
	if v == codecV2 {
		e.CachedTokens = d.int()
		e.CacheWriteTokens = d.int()
		e.Model = d.string()
	}

	// Each header name takes at least two bytes (its length and its value
	// count) and each value at least one, so counts above that are corrupt
	// and are refused before they size an allocation.
	if n := d.count(2); n > 0 {
		e.Header = make(http.Header, n)
		for range n {
			name := d.string()
			nv := d.count(1)
			if d.err != "" {
				break
			}
			vs := make([]string, nv)
			for j := range vs {
				vs[j] = d.string()
			}
			e.Header[name] = vs
		}
	}
	e.Body = d.bytes()
	if d.err == "" && d.off != len(d.buf) {
		d.fail("trailing bytes")
	}
	if d.err != "" {
		return nil, corrupt(d.err)
	}
	return e, nil
}

func corrupt(reason string) error { return fmt.Errorf("%w: %s", ErrCorrupt, reason) }

// decoder reads from buf; after the first failure every read returns a
// zero value and err keeps the first reason.
type decoder struct {
	buf []byte
	off int
	err string
}

func (d *decoder) fail(reason string) {
	if d.err == "" {
		d.err = reason
	}
	d.off = len(d.buf)
}

func (d *decoder) byte() byte {
	if d.off >= len(d.buf) {
		d.fail("truncated")
		return 0
	}
	c := d.buf[d.off]
	d.off++
	return c
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.buf[d.off:])
	return advance(d, v, n, "bad varint")
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.buf[d.off:])
	return advance(d, v, n, "bad uvarint")
}

// advance moves d past the n bytes a binary.Varint or binary.Uvarint read
// took and returns v, or fails with reason when the read found no number
// (n <= 0: too short or overflowing).
func advance[T int64 | uint64](d *decoder, v T, n int, reason string) T {
	if n <= 0 {
		d.fail(reason)
		return 0
	}
	d.off += n
	return v
}

// int reads a varint that must fit an int.
func (d *decoder) int() int {
	v := d.varint()
	if int64(int(v)) != v {
		d.fail("integer out of range")
		return 0
	}
	return int(v)
}

// count reads a uvarint count of items that take at least minBytes each.
func (d *decoder) count(minBytes int) int {
	v := d.uvarint()
	if v > uint64(len(d.buf)-d.off)/uint64(minBytes) {
		d.fail("count exceeds data")
		return 0
	}
	return int(v)
}

// bytes reads a length-prefixed byte string without copying it.
func (d *decoder) bytes() []byte {
	n := d.count(1)
	if d.err != "" || n == 0 {
		return nil
	}
	b := d.buf[d.off : d.off+n : d.off+n]
	d.off += n
	return b
}

func (d *decoder) string() string { return string(d.bytes()) }
