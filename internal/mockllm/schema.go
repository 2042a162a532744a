package mockllm

import (
	"bytes"
	"encoding/json"
	"maps"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// The mock answers structured output (a JSON schema in chat's
// response_format, the Responses API's text.format, Messages'
// output_config.format, a tool's input schema) with a value derived from
// the schema alone, so the same schema always gets the same value. The
// generator is bounded for any schema: a recursion depth, a count of
// values and a count of string bytes; past them it writes the smallest
// value it can, which a schema that demands more than the bounds allow
// (minItems: 1000000) does not accept.

const (
	// maxSchemaDepth bounds the nesting of generated values and $ref hops.
	maxSchemaDepth = 24
	// shallowDepth is where optional properties stop being filled in and
	// a choice (anyOf, oneOf, a list of types) starts preferring a branch
	// without a $ref, so a recursive schema bottoms out.
	shallowDepth = 3
	// maxValues bounds the values (objects, arrays, scalars) of one answer.
	maxValues = 4096
	// maxStringBytes bounds the bytes of all strings of one answer.
	maxStringBytes = 64 << 10
)

// schemaValue is a compact JSON value that the JSON Schema raw accepts,
// or ok false when raw is not a schema (not a JSON object or boolean).
func schemaValue(raw json.RawMessage) (v []byte, ok bool) {
	root, ok := decodeSchema(raw)
	if !ok {
		return nil, false
	}
	g := &schemaGen{root: root, values: maxValues, bytes: maxStringBytes}
	return g.marshal(root), true
}

// marshal generates a value of schema s and encodes it; a value that
// cannot be encoded (a bug, not an input) is null rather than a panic in
// the handler.
func (g *schemaGen) marshal(s any) []byte {
	b, err := json.Marshal(g.value(s, 0, 0))
	if err != nil {
		return []byte("null")
	}
	return b
}

// decodeSchema decodes a schema, numbers kept exact.
func decodeSchema(raw json.RawMessage) (any, bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var root any
	if dec.Decode(&root) != nil {
		return nil, false
	}
	switch root.(type) {
	case map[string]any, bool:
		return root, true
	}
	return nil, false
}

// toolArguments is the arguments of a call to a tool whose input schema
// is raw: a value of the schema, or {"input": last} when the schema
// names no property and admits one (no schema, or {"type":"object"}).
func toolArguments(raw json.RawMessage, last string) string {
	plain := string(mustMarshal(map[string]string{"input": last}))
	root, ok := decodeSchema(raw)
	if !ok {
		return plain
	}
	if m, isObj := root.(map[string]any); isObj {
		props, _ := m["properties"].(map[string]any)
		_, hasRef := m["$ref"]
		free := m["additionalProperties"] != false
		if len(props) == 0 && !hasRef && free && m["required"] == nil && m["anyOf"] == nil && m["oneOf"] == nil && m["allOf"] == nil {
			return plain
		}
	}
	g := &schemaGen{root: root, values: maxValues, bytes: maxStringBytes}
	return string(g.marshal(root))
}

// schemaGen generates one value; values and bytes are what is left of
// the bounds.
type schemaGen struct {
	root   any
	values int
	bytes  int
	sorted map[uintptr][]string // property names of a properties map, sorted once
}

// value is a value of schema s at depth; variant (the index in an array)
// makes items differ, for uniqueItems.
func (g *schemaGen) value(s any, depth, variant int) any {
	if g.values <= 0 {
		return nil // out of bounds
	}
	g.values-- // every value counts, a null too: loops over items end
	m, ok := s.(map[string]any)
	if !ok || depth > maxSchemaDepth {
		return nil // true (anything), false (nothing), absent, or too deep
	}
	if c, ok := m["const"]; ok {
		return c
	}
	if e, ok := m["enum"].([]any); ok && len(e) > 0 {
		return e[variant%len(e)]
	}
	if ref, ok := m["$ref"].(string); ok {
		if target, ok := g.resolve(ref); ok {
			return g.value(target, depth+1, variant)
		}
	}
	if all, ok := m["allOf"].([]any); ok && len(all) > 0 {
		return g.value(g.merge(m, all, depth), depth+1, variant)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if branches, ok := m[k].([]any); ok && len(branches) > 0 {
			return g.value(g.choose(branches, depth), depth+1, variant)
		}
	}
	switch typeOf(m, depth) {
	case "object":
		return g.object(m, depth)
	case "array":
		return g.array(m, depth)
	case "string":
		return g.str(m, variant)
	case "integer":
		return number(m, variant, true)
	case "number":
		return number(m, variant, false)
	case "boolean":
		return variant%2 == 0
	case "null":
		return nil
	}
	return g.str(m, variant) // no type and no keyword that implies one: any value does
}

// resolve follows a $ref within the document: "#", "#/$defs/x",
// "#/definitions/x" or any other JSON pointer from the root.
func (g *schemaGen) resolve(ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#")
	if !ok {
		return nil, false
	}
	cur := g.root
	if p == "" {
		return cur, true
	}
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			if cur, ok = c[tok]; !ok {
				return nil, false
			}
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// merge folds allOf's branches (their $refs followed) and m's own
// keywords into one schema: properties and required united, the other
// keywords the first one set.
func (g *schemaGen) merge(m map[string]any, all []any, depth int) map[string]any {
	out := map[string]any{}
	props := map[string]any{}
	var required []any
	var fold func(s any, d int)
	fold = func(s any, d int) {
		b, ok := s.(map[string]any)
		if !ok || d > maxSchemaDepth || g.values <= 0 {
			return
		}
		g.values-- // a fold is work too: allOf of $refs of allOfs would grow exponentially
		if ref, ok := b["$ref"].(string); ok {
			if t, ok := g.resolve(ref); ok {
				fold(t, d+1)
			}
		}
		if sub, ok := b["allOf"].([]any); ok {
			for _, x := range sub {
				fold(x, d+1)
			}
		}
		for k, v := range b {
			switch k {
			case "properties":
				pm, _ := v.(map[string]any)
				for name, ps := range pm {
					if _, seen := props[name]; !seen {
						props[name] = ps
					}
				}
			case "required":
				r, _ := v.([]any)
				required = append(required, r...)
			case "allOf", "$ref":
			default:
				if _, set := out[k]; !set {
					out[k] = v
				}
			}
		}
	}
	own := map[string]any{}
	for k, v := range m {
		if k != "allOf" {
			own[k] = v
		}
	}
	fold(own, depth)
	for _, b := range all {
		fold(b, depth+1)
	}
	if len(props) > 0 {
		out["properties"] = props
	}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}

// choose picks the branch of a choice to generate: the first, or, deep
// in the value, the first without a $ref, so recursion ends.
func (g *schemaGen) choose(branches []any, depth int) any {
	if depth >= shallowDepth {
		for _, b := range branches {
			if bm, ok := b.(map[string]any); ok && bm["$ref"] == nil && !isComposite(bm) {
				return b
			}
		}
	}
	return branches[0]
}

func isComposite(m map[string]any) bool {
	t := m["type"]
	return t == "object" || t == "array" || m["properties"] != nil || m["items"] != nil
}

// typeOf is the type to generate for m: its "type" (a list's first
// non-null member, or "null" deep in the value when the list has it), or
// the type its keywords imply.
func typeOf(m map[string]any, depth int) string {
	switch t := m["type"].(type) {
	case string:
		return t
	case []any:
		var types []string
		for _, x := range t {
			if s, ok := x.(string); ok {
				types = append(types, s)
			}
		}
		if depth >= shallowDepth && slices.Contains(types, "null") {
			return "null"
		}
		for _, s := range types {
			if s != "null" {
				return s
			}
		}
		if len(types) > 0 {
			return types[0]
		}
	}
	switch {
	case m["properties"] != nil || m["required"] != nil || m["additionalProperties"] != nil:
		return "object"
	case m["items"] != nil || m["prefixItems"] != nil || m["minItems"] != nil:
		return "array"
	case m["minimum"] != nil || m["maximum"] != nil || m["multipleOf"] != nil:
		return "number"
	}
	return ""
}

// object has the required properties, the optional ones too near the
// top, and more (from additionalProperties) up to minProperties.
func (g *schemaGen) object(m map[string]any, depth int) map[string]any {
	props, _ := m["properties"].(map[string]any)
	out := map[string]any{}
	req, _ := m["required"].([]any)
	for _, r := range req {
		if g.values <= 0 {
			break
		}
		name, ok := r.(string)
		if !ok {
			continue
		}
		if _, done := out[name]; done {
			continue
		}
		ps, ok := props[name]
		if !ok {
			ps = m["additionalProperties"]
		}
		out[name] = g.value(ps, depth+1, 0)
	}
	minProps := count(m["minProperties"], 0)
	for _, name := range g.names(props) {
		if g.values <= 0 {
			break
		}
		if _, done := out[name]; done {
			continue
		}
		ps, _ := props[name].(map[string]any)
		if depth < shallowDepth && ps["$ref"] == nil || len(out) < minProps {
			out[name] = g.value(props[name], depth+1, 0)
		}
	}
	for i := 0; len(out) < minProps && m["additionalProperties"] != false && g.values > 0; i++ {
		out["property_"+strconv.Itoa(i)] = g.value(m["additionalProperties"], depth+1, i)
	}
	return out
}

// names is the sorted property names of props, sorted once per map: an
// array of many objects of one schema sorts its properties once.
func (g *schemaGen) names(props map[string]any) []string {
	if len(props) == 0 {
		return nil
	}
	key := reflect.ValueOf(props).Pointer()
	if n, ok := g.sorted[key]; ok {
		return n
	}
	if g.sorted == nil {
		g.sorted = map[uintptr][]string{}
	}
	n := slices.Sorted(maps.Keys(props))
	g.sorted[key] = n
	return n
}

// array has its prefixItems, then items up to minItems (at least one
// near the top, when maxItems allows), each a different variant.
func (g *schemaGen) array(m map[string]any, depth int) []any {
	out := []any{}
	prefix, _ := m["prefixItems"].([]any)
	if tuple, ok := m["items"].([]any); ok { // draft 4-7 tuples
		prefix = tuple
	}
	minItems := count(m["minItems"], 0)
	maxItems := count(m["maxItems"], math.MaxInt)
	want := minItems
	if want == 0 && depth < shallowDepth && maxItems > 0 {
		want = 1
	}
	want = max(want, min(len(prefix), maxItems))
	items := m["items"]
	if _, ok := items.([]any); ok {
		items = m["additionalItems"]
	}
	for i := 0; i < want && g.values > 0; i++ {
		if i < len(prefix) {
			out = append(out, g.value(prefix[i], depth+1, i))
		} else if items == false {
			break
		} else {
			out = append(out, g.value(items, depth+1, i))
		}
	}
	return out
}

// count reads a non-negative integer keyword, or def.
func count(v any, def int) int {
	n, ok := v.(json.Number)
	if !ok {
		return def
	}
	f, err := n.Float64()
	if err != nil || f < 0 {
		return def
	}
	if f > math.MaxInt32 {
		return math.MaxInt32
	}
	return int(f)
}

// formats are the strings written for a string's "format".
var formats = map[string]string{
	"date-time": "2025-01-01T00:00:00Z", "date": "2025-01-01", "time": "00:00:00Z",
	"duration": "P1D", "email": "mock@example.com", "idn-email": "mock@example.com",
	"hostname": "example.com", "idn-hostname": "example.com", "ipv4": "192.0.2.1",
	"ipv6": "2001:db8::1", "uri": "https://example.com/mock", "uri-reference": "https://example.com/mock",
	"iri": "https://example.com/mock", "url": "https://example.com/mock",
	"uuid": "00000000-0000-4000-8000-000000000000",
}

// str is "mock" (with the variant after the first), a format's example,
// padded with "x" to minLength and cut to maxLength (lengths in runes).
func (g *schemaGen) str(m map[string]any, variant int) string {
	s := "mock"
	if f, ok := formats[stringOf(m["format"])]; ok {
		s = f
	}
	if variant > 0 {
		s += "-" + strconv.Itoa(variant)
	}
	minLen := count(m["minLength"], 0)
	if maxLen := count(m["maxLength"], math.MaxInt); len([]rune(s)) > maxLen {
		s = string([]rune(s)[:maxLen])
	}
	if n := len([]rune(s)); n < minLen {
		s += strings.Repeat("x", min(minLen-n, max(g.bytes, 0)))
	}
	g.bytes -= len(s)
	return s
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// number is a number within the schema's bounds: the lower bound (or 0)
// plus the variant, rounded up to multipleOf, an integer when integer;
// when that passes the upper bound, the upper bound (an exclusive pair's
// midpoint for a number).
func number(m map[string]any, variant int, integer bool) json.Number {
	get := func(k string) (float64, bool) {
		n, ok := m[k].(json.Number)
		if !ok {
			return 0, false
		}
		f, err := n.Float64()
		return f, err == nil && !math.IsInf(f, 0) && !math.IsNaN(f)
	}
	lo, hasLo := get("minimum")
	loEx := false
	if x, ok := get("exclusiveMinimum"); ok && (!hasLo || x >= lo) {
		lo, hasLo, loEx = x, true, true
	}
	hi, hasHi := get("maximum")
	hiEx := false
	if x, ok := get("exclusiveMaximum"); ok && (!hasHi || x <= hi) {
		hi, hasHi, hiEx = x, true, true
	}
	step, hasStep := get("multipleOf")
	hasStep = hasStep && step > 0
	if integer {
		if hasLo {
			if c := math.Ceil(lo); loEx && c == lo {
				lo = c + 1
			} else {
				lo = c
			}
		}
		if hasHi {
			if f := math.Floor(hi); hiEx && f == hi {
				hi = f - 1
			} else {
				hi = f
			}
		}
		loEx, hiEx = false, false
	}
	v := float64(variant)
	if hasLo {
		v += lo
		if loEx {
			v++
		}
	}
	if hasStep {
		v = math.Ceil(v/step) * step
	}
	if hasHi && (v > hi || hiEx && v >= hi) {
		switch {
		case hasStep:
			v = math.Floor(hi/step) * step
			if hiEx && v >= hi {
				v -= step
			}
		case loEx || hiEx:
			v = lo + (hi-lo)/2
		default:
			v = hi
		}
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		v = 0 // a multipleOf so small the division overflowed; JSON has no Inf
	}
	if integer || v == math.Trunc(v) && math.Abs(v) < 1<<53 {
		return json.Number(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
}

// structuredReply is the reply to a request that asks for structured
// output with format: chat's response_format, the Responses API's
// text.format or Messages' output_config.format. A json_schema format
// (its schema in "schema", or chat's "json_schema.schema") gets a value
// of the schema; json_object gets {"reply": replyPrefix + last}. ok is
// false for any other format (text) or none.
func structuredReply(format json.RawMessage, last string) (reply string, ok bool) {
	if len(format) == 0 {
		return "", false
	}
	var f struct {
		Type       string          `json:"type"`
		Schema     json.RawMessage `json:"schema"`
		JSONSchema struct {
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	}
	if json.Unmarshal(format, &f) != nil {
		return "", false
	}
	switch f.Type {
	case "json_schema":
		schema := f.Schema
		if len(schema) == 0 {
			schema = f.JSONSchema.Schema
		}
		if v, ok := schemaValue(schema); ok {
			return string(v), true
		}
		return "{}", true // no schema: any JSON value does
	case "json_object":
		return string(mustMarshal(map[string]string{"reply": replyPrefix + last})), true
	}
	return "", false
}
