package keying

import "unicode/utf8"

// Byte classes inside a JSON string. Bytes of multi-byte UTF-8 are plain
// here; runs of plain bytes are validated as UTF-8 separately (utf8.Valid
// is faster than decoding rune by rune, and a run never ends inside a rune
// because it ends at an ASCII byte).
const (
	strPlain = iota
	strQuote
	strBackslash
	strControl
)

var strClass = func() (t [256]uint8) {
	for b := range 0x20 {
		t[b] = strControl
	}
	t['"'] = strQuote
	t['\\'] = strBackslash
	return t
}()

// plainRun returns the end of the run of plain bytes starting at i, and
// whether all of them were ASCII.
func plainRun(in []byte, i int) (int, bool) {
	var high byte
	for i < len(in) && strClass[in[i]] == strPlain {
		high |= in[i]
		i++
	}
	return i, high < utf8.RuneSelf
}

// scanString reads the string starting at c.pos (the opening quote) and
// returns its decoded bytes. raw reports that the string had no escapes, so
// the decoded bytes are c.in between the quotes and the quoted input is
// already canonical. Otherwise the bytes are in c.str. A lone surrogate
// escape decodes to its 3-byte WTF-8 form (0xED 0xA0-0xBF ..), which valid
// UTF-8 never contains, and appendString escapes it again.
func (c *canon) scanString() (s []byte, raw bool, err error) {
	in := c.in
	start := c.pos + 1
	i, ascii := plainRun(in, start)
	if !ascii && !utf8.Valid(in[start:i]) {
		return nil, false, c.failUTF8(start)
	}
	if i == len(in) {
		return nil, false, c.failEOF()
	}
	switch strClass[in[i]] {
	case strQuote:
		c.pos = i + 1
		return in[start:i], true, nil
	case strBackslash:
		c.str = append(c.str[:0], in[start:i]...)
		return c.scanEscaped(i)
	}
	c.pos = i
	return nil, false, c.fail("control character in string")
}

// scanEscaped continues scanString from the backslash at i, decoding into
// c.str.
func (c *canon) scanEscaped(i int) ([]byte, bool, error) {
	in := c.in
	for {
		// in[i] is a backslash.
		if i+1 >= len(in) {
			return nil, false, c.failEOF()
		}
		e := in[i+1]
		i += 2
		switch e {
		case '"', '\\', '/':
			c.str = append(c.str, e)
		case 'b':
			c.str = append(c.str, '\b')
		case 'f':
			c.str = append(c.str, '\f')
		case 'n':
			c.str = append(c.str, '\n')
		case 'r':
			c.str = append(c.str, '\r')
		case 't':
			c.str = append(c.str, '\t')
		case 'u':
			r, ok := hex4(in, i)
			if !ok {
				c.pos = i - 2
				if len(in)-i < 4 && hexPrefix(in[i:]) {
					return nil, false, c.failEOF()
				}
				return nil, false, c.fail(`invalid \u escape`)
			}
			i += 4
			if r >= 0xD800 && r < 0xDC00 && i+1 < len(in) && in[i] == '\\' && in[i+1] == 'u' {
				if lo, ok := hex4(in, i+2); ok && lo >= 0xDC00 && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				// Lone surrogate: keep it distinct (WTF-8) rather than
				// merging it into U+FFFD.
				c.str = append(c.str, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
			} else {
				c.str = utf8.AppendRune(c.str, r)
			}
		default:
			c.pos = i - 2
			return nil, false, c.fail("invalid escape in string")
		}

		j, ascii := plainRun(in, i)
		if !ascii && !utf8.Valid(in[i:j]) {
			return nil, false, c.failUTF8(i)
		}
		c.str = append(c.str, in[i:j]...)
		if j == len(in) {
			return nil, false, c.failEOF()
		}
		switch strClass[in[j]] {
		case strQuote:
			c.pos = j + 1
			return c.str, false, nil
		case strBackslash:
			i = j
			continue
		}
		c.pos = j
		return nil, false, c.fail("control character in string")
	}
}

// failUTF8 reports the first invalid UTF-8 at or after i.
func (c *canon) failUTF8(i int) error {
	for i < len(c.in) {
		r, size := utf8.DecodeRune(c.in[i:])
		if r == utf8.RuneError && size == 1 {
			break
		}
		i += size
	}
	c.pos = i
	return c.fail("invalid UTF-8 in string")
}

func hex4(in []byte, i int) (rune, bool) {
	if len(in)-i < 4 {
		return 0, false
	}
	var r rune
	for _, b := range in[i : i+4] {
		var d byte
		switch {
		case b >= '0' && b <= '9':
			d = b - '0'
		case b >= 'a' && b <= 'f':
			d = b - 'a' + 10
		case b >= 'A' && b <= 'F':
			d = b - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(d)
	}
	return r, true
}

// hexPrefix reports whether b is all hex digits (a \u escape cut short).
func hexPrefix(b []byte) bool {
	_, ok := hex4(append([]byte("0000")[:4-len(b)], b...), 0)
	return ok
}

const hexDigits = "0123456789abcdef"

// escByte marks the bytes appendString must look at: those it escapes, and
// 0xED, which starts a WTF-8 surrogate (or, followed by 0x80-0x9F, a plain
// Hangul character).
var escByte = func() (t [256]bool) {
	for b := range 0x20 {
		t[b] = true
	}
	t['"'], t['\\'], t[0xED] = true, true, true
	return t
}()

// shortEscape is the two-character escape of the bytes that have one.
var shortEscape = [256]byte{'"': '"', '\\': '\\', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// appendString appends the canonical quoted form of the decoded string s,
// which is UTF-8 except for WTF-8 lone surrogates.
//
// It is not jsonstr.Append, on purpose: the canonical form must keep
// what distinguishes two bodies (a lone surrogate stays \udxxx, where
// jsonstr writes U+FFFD for invalid UTF-8) and is fixed by keying's
// Version (\b and \f short escapes, U+2028 unescaped), while jsonstr
// writes answers for JavaScript clients. One escaper for both would tie
// the key format to the answer format.
func appendString(dst, s []byte) []byte {
	dst = append(dst, '"')
	from := 0
	for i := 0; i < len(s); {
		if !escByte[s[i]] {
			i++
			continue
		}
		b := s[i]
		switch {
		case b == 0xED:
			if i+2 >= len(s) || s[i+1] < 0xA0 {
				i++
				continue
			}
			r := rune(b&0x0F)<<12 | rune(s[i+1]&0x3F)<<6 | rune(s[i+2]&0x3F)
			dst = append(dst, s[from:i]...)
			dst = append(dst, '\\', 'u', hexDigits[r>>12], hexDigits[r>>8&0xF], hexDigits[r>>4&0xF], hexDigits[r&0xF])
			i += 3
		default:
			dst = append(dst, s[from:i]...)
			if e := shortEscape[b]; e != 0 {
				dst = append(dst, '\\', e)
			} else {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
		}
		from = i
	}
	dst = append(dst, s[from:]...)
	return append(dst, '"')
}
