package openai

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/corralhq/corral/internal/keying"
)

func TestWithStreamUsage(t *testing.T) {
	tests := []struct {
		give, want string
		changed    bool
	}{
		{`{"model":"m","stream":true}`, `{"model":"m","stream":true,"stream_options":{"include_usage":true}}`, true},
		{"{\"model\":\"m\"  \n}\n", "{\"model\":\"m\",\"stream_options\":{\"include_usage\":true}}\n", true},
		{`{}`, `{"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":false}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{ "include_usage" : null }}`, `{"stream":true,"stream_options":{ "include_usage" : true }}`, true},
		{`{"stream":true,"stream_options":null}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"stream":true,"stream_options":{"include_obfuscation":false}}`, `{"stream":true,"stream_options":{"include_usage":true,"include_obfuscation":false}}`, true},
		{`{"stream_options":{"include_obfuscation":false,"include_usage":false},"stream":true}`, `{"stream_options":{"include_obfuscation":false,"include_usage":true},"stream":true}`, true},
		// The name anywhere but at the top level is not the field.
		{`{"metadata":{"stream_options":"{\"include_usage\":false}"},"stream":true}`, `{"metadata":{"stream_options":"{\"include_usage\":false}"},"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"messages":[{"role":"user","content":"\"stream_options\":{}"}],"stream":true}`, `{"messages":[{"role":"user","content":"\"stream_options\":{}"}],"stream":true,"stream_options":{"include_usage":true}}`, true},
		{`{"x":{"include_usage":false},"stream_options":{"y":{"include_usage":false}}}`, `{"x":{"include_usage":false},"stream_options":{"include_usage":true,"y":{"include_usage":false}}}`, true},
		// Keys are compared decoded.
		{`{"stream\u005foptions":{"include\u005fusage":false}}`, `{"stream\u005foptions":{"include\u005fusage":true}}`, true},
		{`{"a":"\\","stream_options":{}}`, `{"a":"\\","stream_options":{"include_usage":true}}`, true},
		// Keys that differ from include_usage only in case are what a
		// case-insensitive upstream reads: none may say false or null.
		{`{"stream":true,"stream_options":{"Include_Usage":false}}`, `{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":true}}`, true},
		{`{"stream":true,"stream_options":{"x":1,"INCLUDE_USAGE":null}}`, `{"stream":true,"stream_options":{"include_usage":true,"x":1,"INCLUDE_USAGE":true}}`, true},
		{`{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`, `{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":true}}`, true},
		{`{"stream_options":{"Include_Usage":false,"include_usage":false,"iNCLUDE_USAGE":true}}`, `{"stream_options":{"Include_Usage":true,"include_usage":true,"iNCLUDE_USAGE":true}}`, true},
		// Left alone.
		{`{"stream":true,"stream_options":{"include_usage":true}}`, `{"stream":true,"stream_options":{"include_usage":true}}`, false},
		{`{"stream":true,"stream_options":{"include_usage":"yes"}}`, `{"stream":true,"stream_options":{"include_usage":"yes"}}`, false},
		{`{"stream":true,"stream_options":true}`, `{"stream":true,"stream_options":true}`, false},
		{`{"stream":true,"stream_options":[]}`, `{"stream":true,"stream_options":[]}`, false},
		{`{"stream":true,"STREAM_OPTIONS":{"include_usage":false}}`, `{"stream":true,"STREAM_OPTIONS":{"include_usage":false}}`, false},
		{`{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":true}}`, `{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":true}}`, false},
		{`{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":"yes"}}`, `{"stream":true,"stream_options":{"include_usage":true,"Include_Usage":"yes"}}`, false},
		{`{"stream":true,"stream_options":{"include_usage":"yes","Include_Usage":false}}`, `{"stream":true,"stream_options":{"include_usage":"yes","Include_Usage":false}}`, false},
		{`[]`, `[]`, false},
		{`{"a":`, `{"a":`, false},
	}
	for _, tt := range tests {
		got, changed := WithStreamUsage([]byte(tt.give))
		if string(got) != tt.want || changed != tt.changed {
			t.Errorf("WithStreamUsage(%s) = %s, %v; want %s, %v", tt.give, got, changed, tt.want, tt.changed)
		}
	}
}

func TestPrepare(t *testing.T) {
	tests := []struct {
		give    string
		changed bool
	}{
		{`{"model":"m","messages":[]}`, false},
		{`{"model":"m","messages":[],"stream":true}`, true},
		{`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":false}}`, true},
		{`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true}}`, false},
		{`{"model":"m","messages":[],"stream":true,"stream_options":{"include_usage":true,"Include_Usage":false}}`, true},
		{`{"model":"m","messages":[],"stream":true,"metadata":{"stream_options":"x"}}`, true},
	}
	for _, tt := range tests {
		fx, err := Format{}.Parse("t", ChatCompletionsPath, []byte(tt.give))
		if err != nil {
			t.Fatal(err)
		}
		out, changed := Format{}.Prepare(fx, []byte(tt.give))
		if changed != tt.changed {
			t.Errorf("Prepare(%s) changed = %v; want %v (%s)", tt.give, changed, tt.changed, out)
		}
		if changed {
			checkSplice(t, []byte(tt.give), out)
		}
	}
}

// FuzzWithStreamUsage: on every body keying accepts, the splice is one
// byte-level edit (inserting the member, or replacing null, false or the
// white space before the closing brace), the result is a body keying
// accepts with the same key when streaming, with include_usage true, and
// with every other field as the client sent it.
func FuzzWithStreamUsage(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","stream":true}`,
		`{"stream":true,"stream_options":{"include_usage":false,"include_obfuscation":true}}`,
		`{"stream":true,"stream_options":null}`,
		`{"stream":true,"stream_options":{}}`,
		`{"stream\u005foptions":{"include\u005fusage":null},"stream":true}`,
		`{"metadata":{"stream_options":{"include_usage":false}},"stream":true}`,
		`{"messages":[{"role":"user","content":"a\\\"b\"stream_options\":"}],"stream":true,"tools":[{"a":[1,2.5e3,true,null]}]}`,
		"{ \"stream\" : true , \"stream_options\" : { } }\n",
		`{"stream":true,"stream_options":{"Include_Usage":false,"x":null,"INCLUDE_USAGE":null}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if _, err := keying.Parse("t", ChatCompletionsPath, body); err != nil {
			return // the server refuses it before any splice
		}
		out, changed := WithStreamUsage(body)
		if !changed {
			if !bytes.Equal(out, body) {
				t.Fatalf("unchanged but different: %s -> %s", body, out)
			}
			return
		}
		checkSplice(t, body, out)
	})
}

// checkSplice checks that out is body with the usage chunk asked for, as
// one byte-level edit.
func checkSplice(t *testing.T, body, out []byte) {
	t.Helper()
	if !variantUsage(body) {
		checkOneEdit(t, body, out)
	}
	r, err := keying.Parse("t", ChatCompletionsPath, out)
	if err != nil {
		t.Fatalf("spliced body %s: %v", out, err)
	}
	if !r.IncludeUsage {
		t.Fatalf("spliced body %s does not ask for usage", out)
	}
	// Streaming, the stream_options object is not part of the key.
	var f Format
	in, _ := f.Parse("t", ChatCompletionsPath, body)
	if spliced, _ := f.Parse("t", ChatCompletionsPath, out); in.Stream && spliced.Hash != in.Hash {
		t.Fatalf("the splice changed the key of %s (-> %s)", body, out)
	}
	// Every other field is as the client sent it, and every spelling of
	// include_usage is true.
	var before, after map[string]any
	if json.Unmarshal(body, &before) != nil || json.Unmarshal(out, &after) != nil {
		t.Fatalf("not JSON: %s -> %s", body, out)
	}
	opts, _ := after["stream_options"].(map[string]any)
	if opts["include_usage"] != true {
		t.Fatalf("include_usage of %s = %v", out, opts["include_usage"])
	}
	for k, v := range opts {
		if strings.EqualFold(k, "include_usage") {
			if v != true {
				t.Fatalf("%s of %s = %v", k, out, v)
			}
			delete(opts, k)
		}
	}
	if old, _ := before["stream_options"].(map[string]any); old != nil {
		for k := range old {
			if strings.EqualFold(k, "include_usage") {
				delete(old, k)
			}
		}
		before["stream_options"] = old
	} else {
		before["stream_options"] = map[string]any{}
	}
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("the splice changed other fields: %s -> %s", body, out)
	}
}

// variantUsage reports a body whose stream_options holds a key that
// differs from include_usage only in case: its splice may be more than
// one edit.
func variantUsage(body []byte) bool {
	var v struct {
		StreamOptions map[string]json.RawMessage `json:"stream_options"`
	}
	_ = json.Unmarshal(body, &v)
	for k := range v.StreamOptions {
		if k != "include_usage" && strings.EqualFold(k, "include_usage") {
			return true
		}
	}
	return false
}

// checkOneEdit checks that out is body changed by one byte-level edit.
func checkOneEdit(t *testing.T, body, out []byte) {
	t.Helper()
	// One edit: a common prefix and suffix around what was removed.
	p := 0
	for p < len(body) && p < len(out) && body[p] == out[p] {
		p++
	}
	s := 0
	for s < len(body)-p && s < len(out)-p && body[len(body)-1-s] == out[len(out)-1-s] {
		s++
	}
	// What was removed is white space before a closing brace, or (a
	// prefix of) the false or null that became true.
	removed := body[p : len(body)-s]
	if len(bytes.Trim(removed, " \t\r\n")) != 0 && !bytes.HasPrefix([]byte("false"), removed) && !bytes.HasPrefix([]byte("null"), removed) {
		t.Fatalf("the splice of %s removed %q (-> %s)", body, removed, out)
	}
}
