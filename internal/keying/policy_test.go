package keying

import (
	"bytes"
	"encoding/json"
	"testing"
)

// itemsPolicy drops the ids of message and function_call_output items of
// "input" when the body says "store": false.
var itemsPolicy = NewPolicy(map[string]Drop{"stream": {Always: Bool | Null}}).
	WithUnstoredItemIDs("input", "message", "function_call_output")

func canonicalWith(t *testing.T, p *Policy, body string) string {
	t.Helper()
	c := getCanon()
	defer putCanon(c)
	c.policy = p
	c.out = c.out[:0]
	if err := c.run([]byte(body)); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	return string(c.canonical())
}

func TestPolicyUnstoredItemIDs(t *testing.T) {
	tests := []struct {
		name, give, want string
	}{
		{"store false drops the ids",
			`{"store":false,"input":[{"type":"message","id":"msg_1","role":"user","content":"hi"},{"id":"fco_1","call_id":"c","type":"function_call_output","output":"x"}]}`,
			`{"input":[{"content":"hi","role":"user","type":"message"},{"call_id":"c","output":"x","type":"function_call_output"}],"store":false}`},
		{"store after input",
			`{"input":[{"id":"msg_1","type":"message","content":"hi"}],"model":"m","store":false}`,
			`{"input":[{"content":"hi","type":"message"}],"model":"m","store":false}`},
		{"store true keeps them",
			`{"store":true,"input":[{"type":"message","id":"msg_1","content":"hi"}]}`,
			`{"input":[{"content":"hi","id":"msg_1","type":"message"}],"store":true}`},
		{"store absent keeps them",
			`{"input":[{"type":"message","id":"msg_1","content":"hi"}]}`,
			`{"input":[{"content":"hi","id":"msg_1","type":"message"}]}`},
		{"store null keeps them",
			`{"store":null,"input":[{"type":"message","id":"msg_1","content":"hi"}]}`,
			`{"input":[{"content":"hi","id":"msg_1","type":"message"}],"store":null}`},
		{"other types keep them",
			`{"store":false,"input":[{"type":"item_reference","id":"msg_1"},{"id":"rs_1","type":"reasoning","summary":[]},{"id":"msg_2"}]}`,
			`{"input":[{"id":"msg_1","type":"item_reference"},{"id":"rs_1","summary":[],"type":"reasoning"},{"id":"msg_2"}],"store":false}`},
		{"only string ids",
			`{"store":false,"input":[{"type":"message","id":7,"content":"hi"},{"type":"message","id":null}]}`,
			`{"input":[{"content":"hi","id":7,"type":"message"},{"id":null,"type":"message"}],"store":false}`},
		{"only a string type",
			`{"store":false,"input":[{"type":["message"],"id":"msg_1"}]}`,
			`{"input":[{"id":"msg_1","type":["message"]}],"store":false}`},
		{"only items of the field",
			`{"store":false,"other":[{"type":"message","id":"msg_1"}],"input":{"type":"message","id":"msg_2"},"x":{"input":[{"type":"message","id":"msg_3"}]}}`,
			`{"input":{"id":"msg_2","type":"message"},"other":[{"id":"msg_1","type":"message"}],"store":false,"x":{"input":[{"id":"msg_3","type":"message"}]}}`},
		{"nested ids kept",
			`{"store":false,"input":[{"type":"message","id":"msg_1","content":[{"type":"input_text","id":"p","text":"hi"}]}]}`,
			`{"input":[{"content":[{"id":"p","text":"hi","type":"input_text"}],"type":"message"}],"store":false}`},
		{"escaped keys and types",
			`{"st\u006fre":false,"input":[{"\u0069d":"msg_1","typ\u0065":"m\u0065ssage","z":{"b":1,"a":2}}]}`,
			`{"input":[{"type":"message","z":{"a":2,"b":1}}],"store":false}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := canonicalWith(t, itemsPolicy, tt.give)
			if got != tt.want {
				t.Errorf("canonical(%s)\n = %s\nwant %s", tt.give, got, tt.want)
			}
			if again := canonicalWith(t, itemsPolicy, got); again != got {
				t.Errorf("canonicalising again gives %s", again)
			}
		})
	}
}

func TestPolicyUnstoredItemIDsKeys(t *testing.T) {
	key := func(body string) string {
		t.Helper()
		r, err := ParseWith(itemsPolicy, "acme", "/v1/responses", []byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return r.Hash
	}
	a := key(`{"model":"m","store":false,"input":[{"type":"message","id":"msg_a","role":"user","content":"hi"}]}`)
	if b := key(`{"input":[{"content":"hi","role":"user","id":"msg_b","type":"message"}],"store":false,"model":"m"}`); a != b {
		t.Error("unstored item ids changed the key")
	}
	if b := key(`{"model":"m","store":false,"input":[{"type":"message","role":"user","content":"hi"}]}`); a != b {
		t.Error("an unstored item without an id keys apart from one with an id")
	}
	stored := key(`{"model":"m","input":[{"type":"message","id":"msg_a","role":"user","content":"hi"}]}`)
	if b := key(`{"model":"m","input":[{"type":"message","id":"msg_b","role":"user","content":"hi"}]}`); stored == b {
		t.Error("stored item ids share a key")
	}
	// The same body under a policy without the rule keeps its ids.
	r1, _ := ParseWith(OpenAI, "acme", "/v1/responses", []byte(`{"store":false,"input":[{"type":"message","id":"msg_a"}]}`))
	r2, _ := ParseWith(OpenAI, "acme", "/v1/responses", []byte(`{"store":false,"input":[{"type":"message","id":"msg_b"}]}`))
	if r1.Hash == r2.Hash {
		t.Error("OpenAI's policy dropped item ids")
	}
}

// WithUnstoredItemIDs leaves its receiver as it was.
func TestWithUnstoredItemIDsCopies(t *testing.T) {
	base := NewPolicy(nil)
	_ = base.WithUnstoredItemIDs("input", "message")
	if base.items != nil {
		t.Error("WithUnstoredItemIDs changed its receiver")
	}
}

// FuzzUnstoredItemIDs checks that the canonical form under a policy that
// drops unstored item ids is valid JSON and a fixed point, and that the
// rule never turns an accepted body into a rejected one.
func FuzzUnstoredItemIDs(f *testing.F) {
	for _, s := range []string{
		`{"store":false,"input":[{"type":"message","id":"msg_1","role":"user","content":"hi"},{"id":"fco_1","call_id":"c","type":"function_call_output","output":"x"}]}`,
		`{"input":[{"id":"msg_1","type":"message","z":{"b":1,"a":2}}],"model":"m","store":false}`,
		`{"st\u006fre":false,"input":[{"\u0069d":"msg_1","typ\u0065":"m\u0065ssage"},{"type":"item_reference","id":"x"}]}`,
		`{"store":true,"input":[{"type":"message","id":"msg_1"}],"stream":true}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		c := getCanon()
		defer putCanon(c)
		canonical := func(p *Policy, b []byte) ([]byte, error) {
			c.policy, c.out = p, c.out[:0]
			if err := c.run(b); err != nil {
				return nil, err
			}
			return append([]byte(nil), c.canonical()...), nil
		}
		got, err := canonical(itemsPolicy, body)
		_, plainErr := canonical(NewPolicy(map[string]Drop{"stream": {Always: Bool | Null}}), body)
		if (err == nil) != (plainErr == nil) {
			t.Fatalf("error %v with the rule, %v without", err, plainErr)
		}
		if err != nil {
			return
		}
		if !json.Valid(got) {
			t.Fatalf("canonical form %q of %q is not valid JSON", got, body)
		}
		again, err := canonical(itemsPolicy, got)
		if err != nil || !bytes.Equal(again, got) {
			t.Fatalf("not a fixed point:\nbody  %q\ncanon %q\nagain %q (%v)", body, got, again, err)
		}
	})
}
