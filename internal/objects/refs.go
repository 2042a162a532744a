package objects

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// refFields are the body fields (lower case) whose values name stored
// objects: a string, an array of strings, or an object with an "id". They
// are matched at any depth and case-insensitively, because some upstream
// decoders (Go's encoding/json among them) match keys that way.
var refFields = map[string]bool{
	"previous_response_id": true,
	"response_id":          true,
	"input_file_id":        true,
	"file_id":              true,
	"file_ids":             true,
	"training_file":        true,
	"validation_file":      true,
	"conversation":         true,
	"conversation_id":      true,
	"vector_store_id":      true,
	"vector_store_ids":     true,
	"assistant_id":         true,
	"thread_id":            true,
	"container":            true,
	"container_id":         true,
}

// StoreFlag is what a body's top-level "store" field says.
type StoreFlag int

const (
	// StoreAbsent: no top-level "store" field.
	StoreAbsent StoreFlag = iota
	// StoreFalse: every top-level "store" is the literal false.
	StoreFalse
	// StoreTrue: some top-level "store" is not false (a duplicate key
	// cannot hide a true behind a false).
	StoreTrue
)

// Body is what Refs found in a request.
type Body struct {
	// IDs are the object ids the request names, in order, duplicates kept.
	IDs []string
	// Store is the top-level "store" field of a JSON body.
	Store StoreFlag
	// Query is set when the body asks the upstream to select stored
	// objects by a filter rather than by id (an eval's data source over
	// stored completions or responses): the type it names. Such a query
	// runs over every tenant's objects in the shared upstream account.
	Query string
}

// querySources are the object types, by the key they are the value of,
// that make an upstream read stored objects by filter: an eval run's
// "source" of stored completions or stored responses, and an eval's
// "data_source_config" over them.
var querySources = map[string]map[string]bool{
	"source":             {"stored_completions": true, "responses": true},
	"data_source_config": {"stored_completions": true, "logs": true},
}

// ErrBody is returned for a body that cannot be read for references: it
// is refused with a 400, never forwarded, so an upstream with a more
// lenient parser cannot read an id Corral did not see.
var ErrBody = errors.New("objects: unreadable request body")

// MaxRefs bounds the references one body may name (no API takes more
// than a few thousand ids); past it Refs returns ErrTooMany at once
// rather than hold and look up a million ids.
const MaxRefs = 10_000

// ErrTooMany is returned for a body naming more than MaxRefs references.
var ErrTooMany = errors.New("objects: too many object references")

// maxDepth bounds JSON nesting (encoding/json's own limit is 10,000).
const maxDepth = 512

// Refs returns the object ids a request body names. contentType is the
// request's Content-Type. JSON bodies (any body whose first byte after an
// optional BOM and white space is '{' or '[') are walked fully; form and
// multipart bodies are read field by field (file parts are skipped).
// Bodies that are neither and contain a NUL byte (UTF-16 or UTF-32 JSON,
// which some parsers detect) are refused with ErrBody.
func Refs(contentType string, body []byte) (Body, error) {
	if len(body) == 0 {
		return Body{}, nil
	}
	// A Content-Type Corral cannot parse (a duplicated boundary or
	// charset) may still be read by the upstream, one way or another.
	mt, params, err := parseMediaType(contentType)
	if err != nil && strings.TrimSpace(contentType) != "" {
		return Body{}, fmt.Errorf("%w: Content-Type: %v", ErrBody, err)
	}
	var out Body
	// A body that looks like JSON is walked whatever its Content-Type
	// says: many upstreams decode JSON without looking at it.
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	looksJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if looksJSON && mayRefer(trimmed) {
		if out, err = jsonRefs(trimmed); err != nil {
			return Body{}, err
		}
	}
	switch mt {
	case "multipart/form-data":
		mp, err := multipartRefs(body, params["boundary"])
		if err != nil {
			return Body{}, err
		}
		if out.IDs = append(out.IDs, mp.IDs...); len(out.IDs) > MaxRefs {
			return Body{}, ErrTooMany
		}
		return out, nil
	case "application/x-www-form-urlencoded":
		v, err := url.ParseQuery(string(body))
		if err != nil {
			return Body{}, fmt.Errorf("%w: %v", ErrBody, err)
		}
		if out.IDs = append(out.IDs, QueryRefs(v)...); len(out.IDs) > MaxRefs {
			return Body{}, ErrTooMany
		}
		return out, nil
	}
	if !looksJSON && bytes.IndexByte(body, 0) >= 0 {
		return Body{}, fmt.Errorf("%w: not UTF-8", ErrBody)
	}
	return out, nil
}

// IsFineTuned reports whether model names a fine-tuned model ("ft:..."),
// which belongs to the tenant whose fine-tuning job made it.
func IsFineTuned(model string) bool { return strings.HasPrefix(model, "ft:") }

// QueryRefs returns the ids named by form or query fields any of whose
// bracketed parts (so tool_resources[file_ids][], file_ids[0] and
// conversation[id] count) is a reference field; a metadata[...] field is
// the caller's own string.
func QueryRefs(v url.Values) []string {
	var ids []string
	for name, vals := range v {
		if foldKey(name) == "model" {
			for _, s := range vals {
				if IsFineTuned(s) {
					ids = append(ids, s)
				}
			}
			continue
		}
		if !isRefField(name) {
			continue
		}
		for _, s := range vals {
			if s != "" {
				ids = append(ids, s)
			}
		}
	}
	return ids
}

// isRefField reports whether a form field name names objects: some
// bracketed part of it, folded as keys are, is a reference field, and it
// is not below metadata.
func isRefField(name string) bool {
	parts := strings.FieldsFunc(name, func(r rune) bool { return r == '[' || r == ']' || r == '.' })
	for i, p := range parts {
		p = foldKey(p)
		if i == 0 && p == "metadata" {
			return false
		}
		if refFields[p] {
			return true
		}
	}
	return false
}

// foldKey lower-cases a JSON key or form name the way a case-insensitive
// decoder compares it: encoding/json folds each rune as
// ToUpper(ToLower(r)), so 'ſ' (U+017F) matches 's', 'K' (U+212A) 'k', and
// 'ı', 'İ' match 'i'. Those runes become their ASCII letter here.
func foldKey(k string) string {
	ascii := true
	for i := 0; i < len(k); i++ {
		if k[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(k)
	}
	var b strings.Builder
	for _, r := range k {
		if u := unicode.ToUpper(unicode.ToLower(r)); u < utf8.RuneSelf {
			r = unicode.ToLower(u)
		} else {
			r = unicode.ToLower(r)
		}
		b.WriteRune(r)
	}
	return b.String()
}

func multipartRefs(body []byte, boundary string) (Body, error) {
	if boundary == "" {
		return Body{}, fmt.Errorf("%w: multipart without boundary", ErrBody)
	}
	mr := multipart.NewReader(bytes.NewReader(body), boundary)
	var out Body
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return Body{}, fmt.Errorf("%w: %v", ErrBody, err)
		}
		// A part that names a reference field is read even when it
		// says it is a file: some parsers take it as a plain field.
		model := foldKey(p.FormName()) == "model"
		if !model && !isRefField(p.FormName()) {
			continue
		}
		v, err := io.ReadAll(p) // bounded by the buffered body
		if err != nil {
			return Body{}, fmt.Errorf("%w: %v", ErrBody, err)
		}
		if model && !IsFineTuned(string(v)) {
			continue
		}
		if len(v) > 0 {
			if out.IDs = append(out.IDs, string(v)); len(out.IDs) > MaxRefs {
				return Body{}, ErrTooMany
			}
		}
	}
}

// mayRefer is a cheap pre-check that lets the common body (a chat prompt
// with no references) skip the full walk. Every reference field, "store"
// and an item_reference end in one of these key endings followed by the
// closing quote, in some letter case; an escaped key (\u0066ile_id) needs a
// backslash-u. Prompt text rarely contains them, so most bodies cost one
// byte loop.
func mayRefer(b []byte) bool {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '_':
			if hasFold(b[i:], `_id"`) || hasFold(b[i:], `_ids"`) || hasFold(b[i:], `_file"`) || hasFold(b[i:], `_config"`) {
				return true
			}
		case 'c', 'C':
			if hasFold(b[i:], `conversation"`) || hasFold(b[i:], `container"`) {
				return true
			}
		case 's', 'S':
			if hasFold(b[i:], `store"`) || hasFold(b[i:], `source"`) {
				return true
			}
		case 'i', 'I':
			if hasFold(b[i:], `item_reference"`) {
				return true
			}
		case '"':
			if hasFold(b[i:], `"ft:`) {
				return true
			}
		case '\\':
			if i+1 < len(b) && (b[i+1] == 'u' || b[i+1] == 'U') {
				return true
			}
		case 0xC4, 0xC5, 0xE2:
			// İ ı ſ K fold to ASCII letters in a case-insensitive decoder.
			if hasFold(b[i:], "\xc4\xb0") || hasFold(b[i:], "\xc4\xb1") || hasFold(b[i:], "\xc5\xbf") || hasFold(b[i:], "\xe2\x84\xaa") {
				return true
			}
		}
	}
	return false
}

// hasFold reports whether b starts with the lower-case ASCII s, ignoring
// letter case.
func hasFold(b []byte, s string) bool {
	if len(b) < len(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := b[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

// frame is one open JSON object or array while walking a body.
type frame struct {
	array bool
	key   string // objects: the member being read; lower case
	field string // the reference field this container is the value of ("" when none)
	typ   string // objects: their "type" member
	id    string // objects: their "id" member
	under string // the key this container is the value of (folded)
}

// jsonRefs walks a JSON body with encoding/json's tokenizer, which is
// linear in the body's size, decodes escapes in keys, and keeps numbers as
// text (UseNumber), so no input costs more than one pass.
func jsonRefs(b []byte) (Body, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var out Body
	var stack []frame
	// skip > 0 while inside a value that is skipped whole (metadata, whose
	// members are the caller's own strings and never references).
	skip := 0
	values := 0 // top-level values begun; a second one is trailing data
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			if len(stack) != 0 {
				return Body{}, fmt.Errorf("%w: truncated JSON", ErrBody)
			}
			return out, nil
		}
		if err != nil {
			return Body{}, fmt.Errorf("%w: %v", ErrBody, err)
		}
		var top *frame
		if len(stack) > 0 {
			top = &stack[len(stack)-1]
		} else if values++; values > 1 {
			return Body{}, fmt.Errorf("%w: data after the JSON value", ErrBody)
		}
		// A token in an object where a key is expected is a key.
		if top != nil && !top.array && top.key == "" {
			if d, ok := tok.(json.Delim); ok && d == '}' {
				stack = stack[:len(stack)-1]
				if skip > 0 {
					skip--
					continue
				}
				if out.IDs = closeObject(out.IDs, top); len(out.IDs) > MaxRefs {
					return Body{}, ErrTooMany
				}
				if querySources[top.under][top.typ] {
					out.Query = top.typ
				}
				continue
			}
			k, _ := tok.(string)
			top.key = "\x00" + foldKey(k) // non-empty even for ""
			continue
		}
		key := ""
		if top != nil && !top.array {
			key = top.key[1:]
			top.key = ""
		}
		if skip > 0 {
			if d, ok := tok.(json.Delim); ok {
				switch d {
				case '{', '[':
					skip++
					stack = append(stack, frame{array: d == '['})
				case ']':
					skip--
					stack = stack[:len(stack)-1]
				}
			}
			continue
		}
		// field is the reference field the current value belongs to: its
		// own key, or the key of the array holding it.
		field := ""
		switch {
		case top == nil:
		case top.array:
			field = top.field
		case refFields[key]:
			field = key
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if len(stack) >= maxDepth {
					return Body{}, fmt.Errorf("%w: nested deeper than %d", ErrBody, maxDepth)
				}
				if key == "metadata" {
					skip = 1
					stack = append(stack, frame{array: v == '['})
					continue
				}
				stack = append(stack, frame{array: v == '[', field: field, under: key})
			case ']':
				stack = stack[:len(stack)-1]
			}
		case string:
			if top != nil && !top.array {
				switch key {
				case "type":
					top.typ = v
				case "id":
					top.id = v
				}
			}
			if field != "" && v != "" {
				if out.IDs = append(out.IDs, v); len(out.IDs) > MaxRefs {
					return Body{}, ErrTooMany
				}
			}
			if len(stack) == 1 && key == "store" {
				out.Store = StoreTrue // a string "false" is not false
			}
			if len(stack) == 1 && key == "model" && IsFineTuned(v) {
				out.IDs = append(out.IDs, v) // a fine-tuned model is its job owner's
			}
		case bool:
			if len(stack) == 1 && key == "store" && (v || out.Store == StoreTrue) {
				out.Store = StoreTrue
			} else if len(stack) == 1 && key == "store" {
				out.Store = StoreFalse
			}
		default:
			// A number is not false; a null after another value makes the
			// upstream's default (or a true) the answer.
			if len(stack) == 1 && key == "store" && (v != nil || out.Store != StoreAbsent) {
				out.Store = StoreTrue
			}
		}
	}
}

// closeObject adds the ids an object names as a whole: the "id" of an
// object that is a reference field's value ("conversation": {"id": ...}),
// of an item_reference input item, and of a file_id source (an eval run's
// data source: {"type": "file_id", "id": "file-..."}).
func closeObject(ids []string, f *frame) []string {
	if f.id != "" && (f.field != "" || f.typ == "item_reference" || f.typ == "file_id") {
		ids = append(ids, f.id)
	}
	return ids
}

// parseMediaType is mime.ParseMediaType with the common case of every
// JSON request, a bare "application/json", answered without building the
// parameter map.
func parseMediaType(v string) (string, map[string]string, error) {
	if v == "application/json" {
		return v, nil, nil
	}
	return mime.ParseMediaType(v)
}
