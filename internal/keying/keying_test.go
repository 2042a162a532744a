package keying

import (
	"errors"
	"strings"
	"testing"
)

const (
	chatEndpoint = "/v1/chat/completions"
	chatBody     = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hello"}],"temperature":0.2,"seed":12345678901234567890123}`
)

func TestCanonical(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string
	}{
		{"empty object", ` { } `, `{}`},
		{"keys sorted", `{"b":1,"a":2,"c":3}`, `{"a":2,"b":1,"c":3}`},
		{"nested keys sorted", `{"x":{"z":[{"b":1,"a":2}],"y":{}}}`, `{"x":{"y":{},"z":[{"a":2,"b":1}]}}`},
		{"keys sorted by decoded bytes", `{"\u0062":1,"a":2,"\u00e9":3,"Z":4}`, `{"Z":4,"a":2,"b":1,"é":3}`},
		{"whitespace removed", "{ \"a\" :\t[ 1 ,\r\n 2 ] , \"b\" : { } }", `{"a":[1,2],"b":{}}`},
		{"integers", `{"a":[0,7,-7,100,1e2,1E+2,100.00,0.1e3]}`, `{"a":[0,7,-7,100,100,100,100,100]}`},
		{"one", `{"a":[1,1.0,1e0,10e-1,0.1e1,1.000e+0,100e-2]}`, `{"a":[1,1,1,1,1,1,1]}`},
		{"zeros", `{"a":[0,-0,0.0,-0.0e5,0e-9,0E0]}`, `{"a":[0,0,0,0,0,0]}`},
		{"fractions", `{"a":[0.5,5e-1,-1.250,0.000001,1e-6,0.0000001,123.456e1]}`, `{"a":[0.5,0.5,-1.25,0.000001,0.000001,1e-7,1234.56]}`},
		{"large numbers keep every digit", `{"seed":123456789012345678901234567890,"x":1.5e300,"y":1e21,"z":1e22,"w":-12e21,"v":12e22}`, `{"seed":123456789012345678901234567890,"v":1.2e23,"w":-12000000000000000000000,"x":1.5e300,"y":1000000000000000000000,"z":1e22}`},
		{"long exponents", `{"a":[1e00000000000000000000000000001,12.5e-999999999999999999,0e999999999999999999,1e+000000000000000000999999999999999999]}`, `{"a":[10,1.25e-999999999999999998,0,1e999999999999999999]}`},
		{"literals", `{"a":[true,false,null]}`, `{"a":[true,false,null]}`},
		{"string escapes", `{"s":"\u0041\/\"\\\b\f\n\r\t\u0001\u001F\u007f\u00e9\ud83d\ude00"}`, "{\"s\":\"A/\\\"\\\\\\b\\f\\n\\r\\t\\u0001\\u001f\x7f\u00e9\U0001F600\"}"},
		{"raw UTF-8 kept", `{"s":"héllo 😀"}`, `{"s":"héllo 😀"}`},
		{"lone surrogates kept distinct", `{"s":"\uD800x\uDFFF"}`, `{"s":"\ud800x\udfff"}`},
		{"escaped keys", `{"\u006b":1}`, `{"k":1}`},
		{"message content trimmed", `{"messages":[{"role":"user","content":"\n  hi there \u00a0\t"}]}`, `{"messages":[{"content":"hi there","role":"user"}]}`},
		{"content part text trimmed", `{"messages":[{"role":"user","content":[{"type":"text","text":"  hi  "},{"type":"image_url","image_url":{"url":" u "}}]}]}`, `{"messages":[{"content":[{"text":"hi","type":"text"},{"image_url":{"url":" u "},"type":"image_url"}],"role":"user"}]}`},
		{"other message fields kept", `{"messages":[{"role":"user","name":" n ","content":null}]}`, `{"messages":[{"content":null,"name":" n ","role":"user"}]}`},
		{"prompt not trimmed", `{"prompt":" a ","input":[" b "]}`, `{"input":[" b "],"prompt":" a "}`},
		{"nested content not trimmed", `{"x":{"messages":[{"content":" a "}]}}`, `{"x":{"messages":[{"content":" a "}]}}`},
		{"ignored fields removed", `{"stream":true,"a":1,"stream_options":{"include_usage":true},"user":"u","metadata":{"k":"v"},"store":false}`, `{"a":1,"store":false}`},
		{"ignored object with unsorted keys removed", `{"metadata":{"b":{"d":1,"c":2},"a":2},"y":{"f":1,"e":2},"z":2}`, `{"y":{"e":2,"f":1},"z":2}`},
		{"deep unsorted objects", `{"b":{"b":{"b":{"y":1,"x":2},"a":[{"d":1,"c":2}]},"a":1},"a":{"z":null}}`, `{"a":{"z":null},"b":{"a":1,"b":{"a":[{"c":2,"d":1}],"b":{"x":2,"y":1}}}}`},
		{"ignored fields removed when null", `{"stream":null,"stream_options":null,"user":null,"metadata":null,"store":null}`, `{"store":null}`},
		{"ignored fields of the wrong type kept", `{"stream":"yes","user":7,"metadata":[],"store":1,"stream_options":true}`, `{"metadata":[],"store":1,"stream":"yes","stream_options":true,"user":7}`},
		{"stream_options removed after stream", `{"a":1,"stream_options":{"include_usage":true},"b":2,"stream":true,"c":3}`, `{"a":1,"b":2,"c":3}`},
		{"stream_options kept without stream", `{"stream_options":{"include_usage":true},"stream":false}`, `{"stream_options":{"include_usage":true}}`},
		{"ignored fields only at the top level", `{"x":{"stream":true,"user":"u"}}`, `{"x":{"stream":true,"user":"u"}}`},
		{"unknown fields kept", `{"zz_new":{"deep":[1,{"b":null,"a":"x"}]}}`, `{"zz_new":{"deep":[1,{"a":"x","b":null}]}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Canonical([]byte(tt.give))
			if err != nil {
				t.Fatalf("Canonical(%s): %v", tt.give, err)
			}
			if string(got) != tt.want {
				t.Errorf("Canonical(%s)\n got %s\nwant %s", tt.give, got, tt.want)
			}
		})
	}
}

// call is one Parse call.
type call struct {
	tenant, endpoint, body string
}

func chat(body string) call { return call{"acme", chatEndpoint, body} }

func (c call) hash(t *testing.T) string {
	t.Helper()
	r, err := Parse(c.tenant, c.endpoint, []byte(c.body))
	if err != nil {
		t.Fatalf("Parse(%q, %q, %s): %v", c.tenant, c.endpoint, c.body, err)
	}
	return r.Hash
}

func TestParseSameKey(t *testing.T) {
	tests := []struct {
		name string
		give []call // every call must produce the same key
	}{
		{"key order", []call{
			chat(chatBody),
			chat(`{"seed":12345678901234567890123,"temperature":0.2,"messages":[{"content":"Be brief.","role":"system"},{"content":"Hello","role":"user"}],"model":"gpt-4o-mini"}`),
		}},
		{"whitespace", []call{
			chat(chatBody),
			chat("\n{ \"model\" : \"gpt-4o-mini\",\n  \"messages\": [\n    {\"role\": \"system\", \"content\": \"Be brief.\"},\n    {\"role\": \"user\", \"content\": \"Hello\"}\n  ],\n  \"temperature\": 0.2, \"seed\": 12345678901234567890123 }\n"),
		}},
		{"number forms", []call{
			chat(`{"model":"m","temperature":1,"top_p":0.5,"seed":-0}`),
			chat(`{"model":"m","temperature":1.0,"top_p":5e-1,"seed":0}`),
			chat(`{"model":"m","temperature":1e0,"top_p":0.50,"seed":0.0}`),
			chat(`{"model":"m","temperature":10e-1,"top_p":50E-2,"seed":-0e3}`),
			chat(`{"model":"m","temperature":0.1e1,"top_p":0.05e+1,"seed":0}`),
		}},
		{"big integer written with exponent", []call{
			chat(`{"model":"m","seed":12345678901234567890000}`),
			chat(`{"model":"m","seed":1234567890123456789e4}`),
			chat(`{"model":"m","seed":1.2345678901234567890e22}`),
		}},
		{"string escapes", []call{
			chat(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"A/é😀"}]}`),
			chat(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"\u0041\/\u00e9\ud83d\ude00"}]}`),
			chat(`{"\u006dodel":"gpt\u002d4o-mini","messages":[{"role":"\u0075ser","content":"A/\u00E9😀"}]}`),
		}},
		{"message text trimmed", []call{
			chat(`{"model":"m","messages":[{"role":"user","content":"Hello"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"  Hello\n"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"\t\u00a0Hello\u3000\r\n"}]}`),
		}},
		{"content part text trimmed", []call{
			chat(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":[{"text":" Hello\n\n","type":"text"}]}]}`),
		}},
		{"stream and friends", []call{
			chat(`{"model":"m","messages":[]}`),
			chat(`{"model":"m","messages":[],"stream":true}`),
			chat(`{"model":"m","messages":[],"stream":false}`),
			chat(`{"stream":true,"model":"m","stream_options":{"include_usage":true},"messages":[]}`),
			chat(`{"model":"m","messages":[],"user":"u-123","metadata":{"team":"x"}}`),
			chat(`{"model":"m","messages":[],"user":null,"metadata":null,"stream":null,"stream_options":null}`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.give[0].hash(t)
			for _, c := range tt.give[1:] {
				if got := c.hash(t); got != want {
					t.Errorf("key of %s\n = %s, want %s (key of %s)", c.body, got, want, tt.give[0].body)
				}
			}
		})
	}
}

func TestParseDifferentKey(t *testing.T) {
	tests := []struct {
		name string
		give []call // every call must produce a different key
	}{
		{"tenant", []call{
			{"acme", chatEndpoint, chatBody},
			{"globex", chatEndpoint, chatBody},
		}},
		{"endpoint", []call{
			{"acme", "/v1/chat/completions", `{"model":"m","input":"x"}`},
			{"acme", "/v1/embeddings", `{"model":"m","input":"x"}`},
		}},
		{"tenant and endpoint boundary", []call{
			{"ab", "c", `{}`},
			{"a", "bc", `{}`},
			{"a", "b", `{"c":1}`},
		}},
		{"model", []call{
			chat(`{"model":"gpt-4o-mini","messages":[]}`),
			chat(`{"model":"gpt-4o","messages":[]}`),
			chat(`{"messages":[]}`),
		}},
		{"field values", []call{
			chat(`{"model":"m","temperature":0.2}`),
			chat(`{"model":"m","temperature":0.21}`),
			chat(`{"model":"m","temperature":0.02}`),
			chat(`{"model":"m","top_p":0.2}`),
		}},
		{"unknown field added", []call{
			chat(`{"model":"m"}`),
			chat(`{"model":"m","x_custom":1}`),
			chat(`{"model":"m","x_custom":{}}`),
		}},
		{"message text", []call{
			chat(`{"model":"m","messages":[{"role":"user","content":"Hello"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"hello"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"Hel lo"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"Hello."}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"Hello"}]}]}`),
		}},
		{"array order", []call{
			chat(`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}`),
			chat(`{"model":"m","messages":[{"role":"user","content":"b"},{"role":"user","content":"a"}]}`),
			chat(`{"model":"m","stop":["a","b"]}`),
			chat(`{"model":"m","stop":["b","a"]}`),
		}},
		{"prompt whitespace", []call{
			{"acme", "/v1/completions", `{"model":"m","prompt":"Once upon"}`},
			{"acme", "/v1/completions", `{"model":"m","prompt":"Once upon "}`},
			{"acme", "/v1/completions", `{"model":"m","prompt":" Once upon"}`},
			{"acme", "/v1/completions", `{"model":"m","prompt":["Once upon "]}`},
		}},
		{"input whitespace", []call{
			{"acme", "/v1/embeddings", `{"model":"m","input":"text"}`},
			{"acme", "/v1/embeddings", `{"model":"m","input":"text\n"}`},
		}},
		{"nested keys", []call{
			chat(`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"a"}}}`),
			chat(`{"model":"m","response_format":{"type":"json_schema","json_schema":{"Name":"a"}}}`),
			chat(`{"model":"m","response_format":{"type":"json_schema","json_schema":{"name":"a","strict":true}}}`),
		}},
		{"big integer seeds", []call{
			chat(`{"model":"m","seed":12345678901234567890123}`),
			chat(`{"model":"m","seed":12345678901234567890124}`),
			chat(`{"model":"m","seed":9007199254740993}`),
			chat(`{"model":"m","seed":9007199254740992}`),
		}},
		{"string vs number", []call{
			chat(`{"model":"m","n":1}`),
			chat(`{"model":"m","n":"1"}`),
		}},
		{"null vs absent", []call{
			chat(`{"model":"m"}`),
			chat(`{"model":"m","temperature":null}`),
			chat(`{"model":"m","temperature":0}`),
		}},
		{"lone surrogate vs replacement character", []call{
			chat(`{"model":"m","x":"\ud800"}`),
			chat(`{"model":"m","x":"\udc00"}`),
			chat(`{"model":"m","x":"\ufffd"}`),
		}},
		{"ignored field with a wrong type", []call{
			chat(`{"model":"m"}`),
			chat(`{"model":"m","stream":"true"}`),
			chat(`{"model":"m","user":1}`),
		}},
		{"store", []call{
			chat(`{"model":"m"}`),
			chat(`{"model":"m","store":false}`),
			chat(`{"model":"m","store":true}`),
			chat(`{"model":"m","store":null}`),
		}},
		{"stream_options without stream", []call{
			chat(`{"model":"m"}`),
			chat(`{"model":"m","stream_options":{"include_usage":true}}`),
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seen := make(map[string]string)
			for _, c := range tt.give {
				h := c.hash(t)
				if prev, ok := seen[h]; ok {
					t.Errorf("%+v and %s share key %s", c, prev, h)
				}
				seen[h] = c.tenant + " " + c.endpoint + " " + c.body
			}
		})
	}
}

func TestParseFacts(t *testing.T) {
	tests := []struct {
		name string
		give string
		want Request
	}{
		{"defaults", `{}`, Request{N: 1}},
		{"chat", `{"model":"gpt-4o-mini","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"  Héllo "}],"max_tokens":256,"n":3}`,
			Request{Model: "gpt-4o-mini", HasModel: true, Stream: true, IncludeUsage: true, MaxTokens: 256, N: 3}},
		{"escaped model", `{"model":"gpt\u002d4o"}`, Request{Model: "gpt-4o", HasModel: true, N: 1}},
		{"model not a string", `{"model":4}`, Request{HasModel: true, N: 1}},
		{"model null", `{"model":null}`, Request{HasModel: true, N: 1}},
		{"case-variant unknown nested keys", `{"x":{"Model":1,"model":2}}`, Request{N: 1}},
		{"camel-case unknown key", `{"topK":5}`, Request{N: 1}},
		{"stream false", `{"stream":false,"stream_options":{"include_usage":false}}`, Request{N: 1}},
		{"stream not a bool", `{"stream":"true"}`, Request{N: 1}},
		{"include usage without stream", `{"stream_options":{"include_usage":true}}`, Request{IncludeUsage: true, N: 1}},
		{"include usage nested elsewhere", `{"x":{"stream_options":{"include_usage":true}},"include_usage":true}`, Request{N: 1}},
		{"max_completion_tokens preferred", `{"max_tokens":10,"max_completion_tokens":20}`, Request{MaxTokens: 20, N: 1}},
		{"max_completion_tokens preferred in any order", `{"max_completion_tokens":20,"max_tokens":10}`, Request{MaxTokens: 20, N: 1}},
		{"max_tokens when max_completion_tokens is null", `{"max_tokens":10,"max_completion_tokens":null}`, Request{MaxTokens: 10, N: 1}},
		{"integer forms", `{"max_tokens":1e3,"n":2.0}`, Request{MaxTokens: 1000, N: 2}},
		{"max_tokens zero", `{"max_tokens":0}`, Request{N: 1}},
		{"max_tokens not an integer", `{"max_tokens":1.5}`, Request{N: 1}},
		{"max_tokens negative", `{"max_tokens":-1}`, Request{N: 1}},
		{"max_tokens too large", `{"max_tokens":1e30}`, Request{N: 1}},
		{"n zero", `{"n":0}`, Request{N: 1}},
		{"n string", `{"n":"2"}`, Request{N: 1}},
		{"completions prompt", `{"prompt":"abcd","max_tokens":7}`, Request{MaxTokens: 7, N: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse("acme", chatEndpoint, []byte(tt.give))
			if err != nil {
				t.Fatalf("Parse(%s): %v", tt.give, err)
			}
			if len(got.Hash) != 64 || strings.Trim(got.Hash, "0123456789abcdef") != "" {
				t.Errorf("Hash = %q, want 64 lower-case hex digits", got.Hash)
			}
			got.Hash = ""
			if got != tt.want {
				t.Errorf("Parse(%s)\n = %+v\nwant %+v", tt.give, got, tt.want)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		give string
		want string // in the error message
	}{
		{"empty", ``, "empty body"},
		{"only space", " \n", "empty body"},
		{"array", `[]`, "not a JSON object"},
		{"string", `"x"`, "not a JSON object"},
		{"number", `1`, "not a JSON object"},
		{"null", `null`, "not a JSON object"},
		{"byte order mark", "\xef\xbb\xbf{}", "not a JSON object"},
		{"trailing data", `{} x`, "trailing data"},
		{"two objects", `{}{}`, "trailing data"},
		{"trailing comma in object", `{"a":1,}`, "expected a string key"},
		{"trailing comma in array", `{"a":[1,]}`, "unexpected character"},
		{"missing colon", `{"a" 1}`, "expected ':'"},
		{"missing comma", `{"a":1 "b":2}`, "expected ',' or '}'"},
		{"missing array comma", `{"a":[1 2]}`, "expected ',' or ']'"},
		{"unquoted key", `{a:1}`, "expected a string key"},
		{"single quotes", `{'a':1}`, "expected a string key"},
		{"unclosed object", `{"a":1`, "unexpected end"},
		{"unclosed array", `{"a":[1`, "unexpected end"},
		{"unclosed string", `{"a":"x`, "unexpected end"},
		{"unclosed escaped string", `{"a":"\n`, "unexpected end"},
		{"cut in escape", `{"a":"\`, "unexpected end"},
		{"cut in unicode escape", `{"a":"\u00`, "unexpected end"},
		{"cut in literal", `{"a":tru`, "unexpected end"},
		{"cut in number", `{"a":1.`, "unexpected end"},
		{"cut in exponent", `{"a":1e`, "unexpected end"},
		{"cut after minus", `{"a":-`, "unexpected end"},
		{"bad literal", `{"a":nul}`, "invalid literal"},
		{"capital literal", `{"a":True}`, "unexpected character"},
		{"leading zero", `{"a":01}`, "expected ',' or '}'"},
		{"plus sign", `{"a":+1}`, "unexpected character"},
		{"bare point", `{"a":.5}`, "unexpected character"},
		{"no fraction digits", `{"a":1.e5}`, "no digits after '.'"},
		{"no exponent digits", `{"a":1e+}`, "no digits in exponent"},
		{"minus alone", `{"a":-x}`, "invalid number"},
		{"NaN", `{"a":NaN}`, "unexpected character"},
		{"bad escape", `{"a":"\x41"}`, "invalid escape"},
		{"bad unicode escape", `{"a":"\u00g1"}`, `invalid \u escape`},
		{"raw newline in string", "{\"a\":\"x\ny\"}", "control character"},
		{"raw tab in escaped string", "{\"a\":\"\\n\t\"}", "control character"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "invalid UTF-8"},
		{"invalid UTF-8 after escape", "{\"a\":\"\\n\xc3\x28\"}", "invalid UTF-8"},
		{"UTF-8 surrogate", "{\"a\":\"\xed\xa0\x80\"}", "invalid UTF-8"},
		{"invalid UTF-8 in key", "{\"\xff\":1}", "invalid UTF-8"},
		{"duplicate key", `{"model":"a","model":"b"}`, `duplicate object key "model"`},
		{"duplicate key in order", `{"a":1,"b":2,"b":3}`, `duplicate object key "b"`},
		{"duplicate key spelled differently", `{"a":1,"\u0061":2}`, `duplicate object key "a"`},
		{"duplicate ignored field", `{"stream":true,"stream":false}`, `duplicate object key "stream"`},
		{"duplicate nested key", `{"x":[{"b":1,"a":2,"b":3}]}`, `duplicate object key "b"`},
		{"exponent of 19 digits", `{"seed":1e1000000000000000000}`, "exponent of more than 18 digits"},
		{"negative exponent of 19 digits", `{"a":[1.5E-0001000000000000000000]}`, "exponent of more than 18 digits"},
		{"zero with a huge exponent", `{"a":0e99999999999999999999}`, "exponent of more than 18 digits"},
		{"upper-case model key", `{"MODEL":"gpt-4o"}`, `top-level key "MODEL" is a case variant of "model"`},
		{"mixed-case model key beside model", `{"model":"gpt-4o-mini","Model":"gpt-4o"}`, `top-level key "Model" is a case variant of "model"`},
		{"escaped upper-case model key", `{"\u004dodel":"gpt-4o"}`, `case variant of "model"`},
		{"Kelvin sign in max_tokens", `{"max_to\u212aens":5}`, `case variant of "max_tokens"`},
		{"long s in stream", `{"\u017ftream":true}`, `case variant of "stream"`},
		{"upper-case prompt_cache_key", `{"Prompt_Cache_Key":"k"}`, `case variant of "prompt_cache_key"`},
		{"case-variant unknown keys", `{"temperature":0,"Temperature":1}`, `two top-level keys fold to "temperature"`},
		{"too deep", `{"a":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`, "nesting deeper than 128"},
		{"much too deep", strings.Repeat(`{"a":`, 100000), "nesting deeper than 128"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("acme", chatEndpoint, []byte(tt.give))
			if !errors.Is(err, ErrInvalidJSON) {
				t.Fatalf("Parse(%q) error = %v, want ErrInvalidJSON", tt.give, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(%q) error = %q, want it to contain %q", tt.give, err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "keying: ") {
				t.Errorf("error %q lacks the package prefix", err)
			}
			if _, err := Canonical([]byte(tt.give)); !errors.Is(err, ErrInvalidJSON) {
				t.Errorf("Canonical(%q) error = %v, want ErrInvalidJSON", tt.give, err)
			}
		})
	}
}

func TestParseMaxDepth(t *testing.T) {
	// The body is depth 1, so MaxDepth-1 arrays inside it is the limit.
	body := `{"a":` + strings.Repeat("[", MaxDepth-1) + strings.Repeat("]", MaxDepth-1) + `}`
	if _, err := Parse("acme", chatEndpoint, []byte(body)); err != nil {
		t.Fatalf("Parse at MaxDepth: %v", err)
	}
}

func TestParseDoesNotKeepBody(t *testing.T) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	r, err := Parse("acme", chatEndpoint, body)
	if err != nil {
		t.Fatal(err)
	}
	copy(body, `{"model":"XXX-XXXXXXXX"`)
	if r.Model != "gpt-4o-mini" {
		t.Errorf("Model changed with the body to %q", r.Model)
	}
}

func TestParseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items under the race detector")
	}
	body := []byte(chatBody)
	got := testing.AllocsPerRun(100, func() {
		if _, err := Parse("acme", chatEndpoint, body); err != nil {
			t.Fatal(err)
		}
	})
	// The Hash and Model strings.
	if got > 2 {
		t.Errorf("Parse allocates %v times per call, want at most 2", got)
	}
}
