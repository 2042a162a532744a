package keying

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math/big"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

var fuzzSeeds = []string{
	chatBody,
	`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"What is the capital of France?"}],"temperature":0.7,"max_tokens":256,"stream":true,"stream_options":{"include_usage":true},"user":"user-1234"}`,
	`{"model":"gpt-4o","messages":[{"role":"user","content":[{"type":"text","text":"  What's in this image? "},{"type":"image_url","image_url":{"url":"https://example.com/cat.png","detail":"low"}}]}],"max_completion_tokens":300,"n":2,"seed":9007199254740993}`,
	`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"Weather in Paris?"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"{\"temp\":21.5}"}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}],"tool_choice":"auto"}`,
	`{"model":"gpt-3.5-turbo-instruct","prompt":"Once upon a time ","max_tokens":16,"logit_bias":{"50256":-100},"stop":["\n\n"],"echo":false}`,
	`{"model":"text-embedding-3-small","input":["The food was delicious","\u00e9t\u00e9 \ud83d\ude00"],"encoding_format":"float","dimensions":256}`,
	`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"object"}}},"metadata":{"a":"b"},"store":true}`,
	`{"a":[1,1.0,1e0,10e-1,0.1e1,-0,0.0000001,1e21,1e22,123456789012345678901234567890,1E-999999999999999999]}`,
	`{"a":1E-9999999999999999999}`,
	`{"model":"a","MODEL":"b"}`,
	`{"Model":"x","\u212a":1,"k":2}`,
	`{"s":"\u0000\u001f\"\\\/\b\f\n\r\t\ud800\udfff\uDBFF\uDC00","\u00e9":1,"e":2}`,
	"{ \"b\" : [ { \"z\" : null , \"y\" : true } ] ,\n\t\"a\" : false }",
	`{"a":1,"a":2}`,
	`{"a":[[[[[[[[[[]]]]]]]]]]}`,
	`[1,2]`,
	`{"a":"x"} trailing`,
	`{"messages":[{"content":"\u2028 x \u3000"},{"content":[{"text":"\u0085y\u00a0"}]}],"prompt":" p ","input":" i "}`,
}

func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		r, err := Parse("acme", chatEndpoint, body)
		canon, cerr := Canonical(body)
		if (err == nil) != (cerr == nil) {
			t.Fatalf("Parse error %v but Canonical error %v", err, cerr)
		}
		ref, refErr := reference(body)
		if err != nil {
			if !errors.Is(err, ErrInvalidJSON) || !strings.HasPrefix(err.Error(), "keying: ") {
				t.Fatalf("error %q is not a keying ErrInvalidJSON", err)
			}
			if refErr == nil {
				t.Fatalf("rejected %q (%v), but the reference accepts it", body, err)
			}
			return
		}
		if len(r.Hash) != 64 {
			t.Fatalf("Hash %q is not 64 hex digits", r.Hash)
		}
		if !json.Valid(canon) {
			t.Fatalf("canonical form %q of %q is not valid JSON", canon, body)
		}

		// The canonical form is a fixed point, and has the same key.
		again, err := Canonical(canon)
		if err != nil {
			t.Fatalf("canonical form %q rejected: %v", canon, err)
		}
		if !bytes.Equal(again, canon) {
			t.Fatalf("not a fixed point:\nbody   %q\ncanon  %q\nagain  %q", body, canon, again)
		}
		r2, err := Parse("acme", chatEndpoint, canon)
		if err != nil || r2.Hash != r.Hash {
			t.Fatalf("canonical form %q has key %s (%v), body has %s", canon, r2.Hash, err, r.Hash)
		}

		if errors.Is(refErr, errNotComparable) {
			return
		}
		if refErr != nil {
			t.Fatalf("accepted %q, but the reference rejects it: %v", body, refErr)
		}
		if !bytes.Equal(canon, ref.canon) {
			t.Fatalf("canonical form differs from the reference:\nbody %q\ngot  %q\nwant %q", body, canon, ref.canon)
		}
		r.Hash = ""
		if r != ref.req {
			t.Fatalf("facts of %q\n = %+v\nwant %+v", body, r, ref.req)
		}
	})
}

// errNotComparable marks input the encoding/json reference cannot judge:
// encoding/json turns invalid UTF-8 and lone surrogates into U+FFFD, where
// keying rejects the one and keeps the other.
var errNotComparable = errors.New("not comparable")

var surrogateEscape = regexp.MustCompile(`\\u[dD][89a-fA-F]`)

type refResult struct {
	canon []byte
	req   Request
}

// reference canonicalises body the slow, obvious way, on top of
// encoding/json: decode to a tree with json.Decoder tokens (keeping numbers
// as text and spotting duplicate keys), then write the tree out again.
func reference(body []byte) (refResult, error) {
	if !json.Valid(body) {
		return refResult{}, errors.New("invalid JSON")
	}
	if !utf8.Valid(body) || surrogateEscape.Match(body) {
		return refResult{}, errNotComparable
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	v, err := refRead(dec, 0)
	if err != nil {
		return refResult{}, err
	}
	root, ok := v.(*refObject)
	if !ok {
		return refResult{}, errors.New("not an object")
	}
	if err := refFolds(root); err != nil {
		return refResult{}, err
	}
	var res refResult
	res.canon = refWrite(nil, root, "root")
	res.req = refFacts(root)
	return res, nil
}

type refObject struct {
	vals map[string]any
}

func refRead(dec *json.Decoder, depth int) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		if n, ok := tok.(json.Number); ok {
			_, exp, _ := strings.Cut(strings.ToLower(string(n)), "e")
			if len(strings.TrimLeft(strings.TrimLeft(exp, "+-"), "0")) > MaxExponentDigits {
				return nil, errors.New("exponent out of range")
			}
		}
		return tok, nil // string, json.Number, bool or nil
	}
	if depth+1 > MaxDepth {
		return nil, errors.New("too deep")
	}
	if d == '[' {
		a := []any{}
		for dec.More() {
			v, err := refRead(dec, depth+1)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token()
		return a, err
	}
	o := &refObject{vals: map[string]any{}}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil, err
		}
		key := k.(string)
		if _, dup := o.vals[key]; dup {
			return nil, fmt.Errorf("duplicate key %q", key)
		}
		v, err := refRead(dec, depth+1)
		if err != nil {
			return nil, err
		}
		o.vals[key] = v
	}
	_, err = dec.Token()
	return o, err
}

// refFolds is the case rule the slow way: strings.EqualFold between every
// pair of top-level keys, and between each key and the fields Corral reads.
func refFolds(root *refObject) error {
	keys := slices.Collect(maps.Keys(root.vals))
	for i, k := range keys {
		for _, f := range readFields {
			if k != f && strings.EqualFold(k, f) {
				return fmt.Errorf("%q is a case variant of %q", k, f)
			}
		}
		for _, k2 := range keys[i+1:] {
			if strings.EqualFold(k, k2) {
				return fmt.Errorf("%q and %q differ only in case", k, k2)
			}
		}
	}
	return nil
}

func refDropped(root *refObject, key string) bool {
	switch root.vals[key].(type) {
	case nil:
		return key == "stream" || key == "stream_options" || key == "metadata" || key == "user"
	case bool:
		return key == "stream"
	case *refObject:
		return key == "metadata" || key == "stream_options" && root.vals["stream"] == true
	case string:
		return key == "user"
	}
	return false
}

// refWrite writes v; where is its place: root, messages, message, content,
// part, text or other.
func refWrite(dst []byte, v any, where string) []byte {
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...)
	case bool:
		return fmt.Append(dst, v)
	case json.Number:
		return append(dst, refNumber(string(v))...)
	case string:
		if where == "content" || where == "text" {
			v = strings.TrimSpace(v)
		}
		return refString(dst, v)
	case []any:
		elem := map[string]string{"messages": "message", "content": "part"}[where]
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = refWrite(dst, e, elem)
		}
		return append(dst, ']')
	case *refObject:
		keys := make([]string, 0, len(v.vals))
		for k := range v.vals {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		first := true
		for _, k := range keys {
			if where == "root" && refDropped(v, k) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = refString(dst, k)
			dst = append(dst, ':')
			child := ""
			switch {
			case where == "root" && k == "messages":
				child = "messages"
			case where == "message" && k == "content":
				child = "content"
			case where == "part" && k == "text":
				child = "text"
			}
			dst = refWrite(dst, v.vals[k], child)
		}
		return append(dst, '}')
	}
	panic(fmt.Sprintf("unexpected %T", v))
}

func refString(dst []byte, s string) []byte {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20:
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return append(dst, b.String()...)
}

// refNumber normalises a JSON number with strings and math/big, as a
// second, independent spelling of appendDecimal's rules.
func refNumber(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	intPart, frac, _ := strings.Cut(mant, ".")
	e := new(big.Int)
	if exp != "" {
		e.SetString(strings.TrimPrefix(exp, "+"), 10)
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	if digits == "" {
		return "0"
	}
	e.Sub(e, big.NewInt(int64(len(frac))))
	trimmed := strings.TrimRight(digits, "0")
	e.Add(e, big.NewInt(int64(len(digits)-len(trimmed))))
	digits = trimmed
	n := new(big.Int).Add(e, big.NewInt(int64(len(digits)))) // point position

	sign := ""
	if neg {
		sign = "-"
	}
	switch {
	case e.Sign() >= 0 && e.Cmp(big.NewInt(21)) <= 0:
		return sign + digits + strings.Repeat("0", int(e.Int64()))
	case e.Sign() < 0 && n.Sign() > 0:
		p := int(n.Int64())
		return sign + digits[:p] + "." + digits[p:]
	case e.Sign() < 0 && n.Cmp(big.NewInt(-6)) > 0:
		return sign + "0." + strings.Repeat("0", int(-n.Int64())) + digits
	}
	m := digits[:1]
	if len(digits) > 1 {
		m += "." + digits[1:]
	}
	return sign + m + "e" + n.Sub(n, big.NewInt(1)).String()
}

// refInt is toInt for the reference: a non-negative integer below 10^18.
func refInt(v any) (int, bool) {
	num, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	canon := refNumber(string(num))
	if strings.ContainsAny(canon, ".e-") || len(canon) > 18 {
		return 0, false
	}
	var n int
	_, err := fmt.Sscan(canon, &n)
	return n, err == nil
}

func refFacts(root *refObject) Request {
	r := Request{N: 1}
	r.Model, _ = root.vals["model"].(string)
	_, r.HasModel = root.vals["model"]
	r.Stream, _ = root.vals["stream"].(bool)
	if so, ok := root.vals["stream_options"].(*refObject); ok {
		r.IncludeUsage, _ = so.vals["include_usage"].(bool)
	}
	if n, ok := refInt(root.vals["max_completion_tokens"]); ok {
		r.MaxTokens = n
	} else if n, ok := refInt(root.vals["max_tokens"]); ok {
		r.MaxTokens = n
	}
	if n, ok := refInt(root.vals["n"]); ok && n > 0 {
		r.N = n
	}
	return r
}

// TestReference keeps the reference honest on the fuzz seeds.
func TestReference(t *testing.T) {
	for _, s := range fuzzSeeds {
		ref, refErr := reference([]byte(s))
		got, err := Canonical([]byte(s))
		if errors.Is(refErr, errNotComparable) {
			continue
		}
		if (err == nil) != (refErr == nil) {
			t.Errorf("%s: error %v, reference error %v", s, err, refErr)
			continue
		}
		if err == nil && !bytes.Equal(got, ref.canon) {
			t.Errorf("%s:\n got %s\nwant %s", s, got, ref.canon)
		}
	}
}
