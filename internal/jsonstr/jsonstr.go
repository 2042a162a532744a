// Package jsonstr appends Go strings as JSON strings without reflection,
// for the hot paths that write JSON by hand (the mock model's streams,
// replays of stored answers, the access log line). It imports only the
// standard library.
package jsonstr

import "unicode/utf8"

// Append appends s to dst as a JSON string. Like encoding/json it escapes
// every control character (so the result never holds a raw newline and can
// sit on one SSE data line), turns invalid UTF-8 into U+FFFD and escapes
// U+2028 and U+2029 (valid JSON, but they break JavaScript parsers).
// Unlike encoding/json it leaves <, > and & alone: these bodies are never
// embedded in HTML. That is also exactly how log/slog's JSON handler
// escapes strings, which the access line relies on (internal/accessline
// tests the two against each other).
func Append(dst []byte, s string) []byte {
	return AppendTail(append(dst, '"'), s)
}

// plain marks the ASCII bytes copied as they are: all printable ASCII and
// DEL, except '"' and '\\'.
var plain = func() (t [utf8.RuneSelf]bool) {
	for c := ' '; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

const hexDigits = "0123456789abcdef"

// word is the eight bytes of s from i, little-endian (one load).
func word(s string, i int) uint64 {
	_ = s[i+7]
	return uint64(s[i]) | uint64(s[i+1])<<8 | uint64(s[i+2])<<16 | uint64(s[i+3])<<24 |
		uint64(s[i+4])<<32 | uint64(s[i+5])<<40 | uint64(s[i+6])<<48 | uint64(s[i+7])<<56
}

// mayEscape reports whether any of the eight bytes in x is a control byte
// (< 0x20), '"', '\\' or not ASCII: the bytes AppendTail must look at.
// Each test is exact about whether some byte matches ("Bit Twiddling
// Hacks": haszero and hasless, which hold for values up to 128).
func mayEscape(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	ctl := (x - 0x20*ones) &^ x
	q := x ^ ('"' * ones)
	bs := x ^ ('\\' * ones)
	return (x|ctl|(q-ones)&^q|(bs-ones)&^bs)&highs != 0
}

// AppendTail appends s as the rest of a JSON string, after an opening
// quote the caller wrote (the access line's keys carry it: `,"path":"`),
// and the closing quote. Append is AppendTail after a quote.
func AppendTail(b []byte, s string) []byte {
	// Most values (ids, paths, model names) need no escaping: find the
	// first byte that may, eight at a time (the last eight overlapping
	// the word before), and copy up to it in one go.
	i := 0
	if len(s) >= 8 {
		for ; i+8 <= len(s); i += 8 {
			if mayEscape(word(s, i)) {
				break
			}
		}
		if i+8 > len(s) && !mayEscape(word(s, len(s)-8)) {
			i = len(s)
		}
	}
	for i < len(s) && s[i] < utf8.RuneSelf && plain[s[i]] {
		i++
	}
	if i == len(s) {
		b = append(b, s...)
		return append(b, '"')
	}
	from := 0 // start of the run of bytes not yet copied
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if plain[c] {
				i++
				continue
			}
			b = append(b, s[from:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			from = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, s[from:i]...)
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, s[from:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		from = i
	}
	b = append(b, s[from:]...)
	return append(b, '"')
}
