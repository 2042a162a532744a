package objects

import (
	"bytes"
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
	// IDs are the object ids the request names, duplicates kept:
	// fine-tuned models among them (their job owner's).
	IDs []string
	// Models are the models the body names below its top level (a
	// batch's requests, a realtime session, a grader), which the model
	// allow-list covers as it covers the top-level one.
	Models []string
	// Store is the top-level "store" field of a JSON body.
	Store StoreFlag
	// Query is set when the body asks the upstream to select stored
	// objects by a filter rather than by id (an eval's data source over
	// stored completions or responses): the type it names. Such a query
	// runs over every tenant's objects in the shared upstream account.
	Query string
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

// Refs returns the object ids a request body names. path is the request's
// path below /v1 as the upstream will see it (percent-decoded), which
// decides where a JSON body names objects (see positions.go);
// contentType is the request's Content-Type. JSON bodies (any body whose
// first byte after an optional BOM and white space is '{' or '[') are read
// by their endpoint's schema; form and multipart bodies field by field
// (file parts are skipped). Bodies that are neither and contain a NUL byte
// (UTF-16 or UTF-32 JSON, which some parsers detect) are refused with
// ErrBody.
func Refs(path, contentType string, body []byte) (Body, error) {
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
	// A body that looks like JSON is read whatever its Content-Type
	// says: many upstreams decode JSON without looking at it.
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf")), " \t\r\n")
	looksJSON := len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
	if sc := schemaFor(path); looksJSON && (sc.models || mayRefer(trimmed)) {
		if out, err = jsonRefs(sc, trimmed); err != nil {
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

// jsonRefs reads a JSON body by its endpoint's schema. The top-level
// model of any body is read too: a fine-tuned model is its job owner's.
func jsonRefs(sc schema, b []byte) (Body, error) {
	root, store, err := parseTree(b)
	if err != nil {
		return Body{}, err
	}
	r := &reader{}
	if root.kind == kindObject {
		for _, m := range root.strings("model") {
			if IsFineTuned(m) {
				r.id(m)
			}
		}
		sc.read(r, root)
	} else {
		generic.read(r, root) // no endpoint takes an array: read it all
	}
	if r.err != nil {
		return Body{}, r.err
	}
	return Body{IDs: r.ids, Models: r.models, Store: store, Query: r.query}, nil
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

// parseMediaType is mime.ParseMediaType with the common case of every
// JSON request, a bare "application/json", answered without building the
// parameter map.
func parseMediaType(v string) (string, map[string]string, error) {
	if v == "application/json" {
		return v, nil, nil
	}
	return mime.ParseMediaType(v)
}

// BatchLine returns what one line of a batch's input file names: the
// object its url names (POST /v1/responses/{id}/... style), and the
// objects and models of its body, read by the schema of its url (the
// body's top-level model included: the upstream runs it). A line that is
// not one JSON object is ErrBody. Every duplicate of url or body counts.
func BatchLine(line []byte) (Body, error) {
	root, _, err := parseTree(line)
	if err != nil {
		return Body{}, err
	}
	if root.kind != kindObject {
		return Body{}, fmt.Errorf("%w: a batch line is not a JSON object", ErrBody)
	}
	r := &reader{}
	urls := root.strings("url")
	methods := root.strings("method")
	if len(methods) == 0 {
		methods = []string{"POST"}
	}
	for i, u := range urls {
		u, _, _ = strings.Cut(strings.TrimPrefix(u, "/v1"), "?")
		urls[i] = u
		for _, m := range methods {
			if acc := Route(strings.ToUpper(m), u); acc.Op == Object {
				r.id(acc.ID)
			}
		}
	}
	for _, b := range root.all("body") {
		if b.kind != kindObject {
			continue
		}
		r.model(b, "model")
		if len(urls) == 0 {
			generic.read(r, b)
		}
		for _, u := range urls {
			schemaFor(u).read(r, b)
		}
	}
	if r.err != nil {
		return Body{}, r.err
	}
	return Body{IDs: r.ids, Models: r.models, Query: r.query}, nil
}
