package openai

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
)

// usageMember is the member the splice makes true.
const usageMember = `"include_usage":true`

// WithStreamUsage returns body asking the upstream for the usage chunk of a
// stream, and whether it differs from body: every upstream call is then
// charged its real usage (the stored entry of a cached stream carries it
// too, so non-streaming hits have it, and any follower that asks for
// usage can have it). The usage chunk is filtered out for clients that
// did not ask (Format.Hidden).
//
// The edit is made on the bytes, the only change Corral ever makes to a
// body; everything else is forwarded as the client wrote it:
//   - no top-level stream_options: "stream_options":{"include_usage":true}
//     is added before the body's closing brace;
//   - "stream_options": null: the null becomes {"include_usage":true};
//   - a stream_options object without include_usage: the member is added
//     first in it, the client's other fields (include_obfuscation, ...)
//     kept;
//   - include_usage false or null: the value becomes true;
//   - a key in stream_options that differs from include_usage only in
//     case ("Include_Usage"), which an upstream matching keys
//     case-insensitively reads as include_usage, whichever of them it
//     takes: its false or null becomes true as well, so no spelling can
//     turn the usage chunk off. What the client asked for is
//     include_usage by OpenAI's own name (keying's IncludeUsage), which
//     decides whether it receives the chunk.
//
// Anything else is left as it is: include_usage already true under every
// spelling, a stream_options or include_usage of a type the API refuses
// (the upstream answers the client's own body), a top-level key that
// differs from stream_options only in case (keying refuses such a body
// before it is sent), and a body that is not a JSON object. body must hold
// no duplicate keys, as keying guarantees of every body it accepts; keys
// are compared decoded, so "stream\u005foptions" is stream_options.
func WithStreamUsage(body []byte) ([]byte, bool) {
	open := skipSpace(body, 0)
	if open == len(body) || body[open] != '{' {
		return body, false
	}
	root, ok := scanObject(body, open, "stream_options")
	if !ok || len(root.variants) > 0 {
		return body, false
	}
	if !root.found {
		before := bytes.TrimRight(body[:root.close], " \t\r\n")
		out := make([]byte, 0, len(body)+len(`,"stream_options":{}`)+len(usageMember))
		out = append(out, before...)
		if !root.empty {
			out = append(out, ',')
		}
		out = append(out, `"stream_options":{`+usageMember+`}`...)
		return append(out, body[root.close:]...), true
	}
	switch v := body[root.start:root.end]; v[0] {
	case 'n': // null
		return replace(body, root.start, root.end, `{`+usageMember+`}`), true
	case '{':
	default:
		return body, false
	}
	opts, ok := scanObject(body, root.start, "include_usage")
	if !ok {
		return body, false
	}
	// The edits, in the order of their offsets: the member added first in
	// the object, then each spelling's false or null made true.
	var edits []edit
	if !opts.found {
		insert := usageMember
		if !opts.empty {
			insert += ","
		}
		edits = append(edits, edit{at: root.start + 1, to: root.start + 1, with: insert})
	}
	spans := opts.variants
	if opts.found {
		switch string(body[opts.start:opts.end]) {
		case "true", "false", "null":
		default:
			return body, false // a type the API refuses: the client's own body answers
		}
		spans = append(spans, span{opts.start, opts.end})
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	for _, sp := range spans {
		switch string(body[sp.start:sp.end]) {
		case "false", "null":
			edits = append(edits, edit{at: sp.start, to: sp.end, with: "true"})
		}
	}
	if len(edits) == 0 {
		return body, false
	}
	out := make([]byte, 0, len(body)+len(usageMember)+1)
	last := 0
	for _, e := range edits {
		out = append(out, body[last:e.at]...)
		out = append(out, e.with...)
		last = e.to
	}
	return append(out, body[last:]...), true
}

// edit replaces body[at:to] with with.
type edit struct {
	at, to int
	with   string
}

// replace returns a copy of body with body[from:to] replaced by with.
func replace(body []byte, from, to int, with string) []byte {
	out := make([]byte, 0, len(body)-(to-from)+len(with))
	out = append(out, body[:from]...)
	out = append(out, with...)
	return append(out, body[to:]...)
}

// objectScan is what scanObject found in one object.
type objectScan struct {
	close      int  // offset of the closing brace
	empty      bool // the object has no members
	found      bool // a member named name is present
	start, end int  // its value's span, when found
	// variants are the value spans of the members whose keys differ from
	// name only in case.
	variants []span
}

// span is a value's offsets in a body.
type span struct{ start, end int }

// scanObject reads the object whose '{' is at b[open] and looks for the
// member called name. ok is false when b is not well-formed there.
func scanObject(b []byte, open int, name string) (s objectScan, ok bool) {
	i := skipSpace(b, open+1)
	s.empty = true
	if i < len(b) && b[i] == '}' {
		s.close = i
		return s, true
	}
	for i < len(b) {
		if b[i] != '"' {
			return s, false
		}
		keyEnd, ok := skipString(b, i)
		if !ok {
			return s, false
		}
		key := b[i:keyEnd]
		i = skipSpace(b, keyEnd)
		if i == len(b) || b[i] != ':' {
			return s, false
		}
		start := skipSpace(b, i+1)
		end, ok := skipValue(b, start)
		if !ok {
			return s, false
		}
		s.empty = false
		switch k := decodeKey(key); {
		case k == name:
			s.found, s.start, s.end = true, start, end
		case strings.EqualFold(k, name):
			s.variants = append(s.variants, span{start, end})
		}
		i = skipSpace(b, end)
		if i == len(b) {
			return s, false
		}
		switch b[i] {
		case '}':
			s.close = i
			return s, true
		case ',':
			i = skipSpace(b, i+1)
		default:
			return s, false
		}
	}
	return s, false
}

// decodeKey is the decoded text of the quoted key q; only keys with
// escapes (rare) are decoded through encoding/json.
func decodeKey(q []byte) string {
	if bytes.IndexByte(q, '\\') < 0 {
		return string(q[1 : len(q)-1])
	}
	var k string
	if json.Unmarshal(q, &k) != nil {
		return ""
	}
	return k
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the offset just past the string whose quote is at
// b[i].
func skipString(b []byte, i int) (int, bool) {
	for i++; ; {
		q := bytes.IndexByte(b[i:], '"')
		if q < 0 {
			return 0, false
		}
		i += q
		// The quote ends the string unless an odd run of backslashes
		// escapes it.
		n := 0
		for j := i - 1; b[j] == '\\'; j-- {
			n++
		}
		i++
		if n%2 == 0 {
			return i, true
		}
	}
}

// skipValue returns the offset just past the value starting at b[i]. It
// trusts b to be valid JSON (keying has read it) and only finds where
// each value ends: strings by their quotes, objects and arrays by their
// brackets outside strings, literals and numbers by the next delimiter.
func skipValue(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; i < len(b); i++ {
			switch b[i] {
			case '"':
				end, ok := skipString(b, i)
				if !ok {
					return 0, false
				}
				i = end - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, true
				}
			}
		}
		return 0, false
	}
	start := i
	for i < len(b) && !delimiter(b[i]) {
		i++
	}
	return i, i > start
}

// delimiter reports whether c ends a literal or a number.
func delimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\r', '\n', ',', '}', ']':
		return true
	}
	return false
}
