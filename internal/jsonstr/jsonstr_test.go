package jsonstr

import (
	"encoding/json"
	"testing"
)

func TestAppendMatchesEncodingJSON(t *testing.T) {
	tests := []string{"", "plain", "quote \" and \\ backslash", "line\nbreak\ttab\rcr", "\x00\x1f ctrl", "ünïcødé 🙂",
		"bad \xff utf8", "sep \u2028 \u2029", "<html> & </html>"}
	for _, give := range tests {
		got := Append(nil, give)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("Append(%q) = %s: not JSON: %v", give, got, err)
		}
		want := give
		if w, _ := json.Marshal(give); json.Unmarshal(w, &want) != nil {
			t.Fatal("encoding/json round trip failed")
		}
		if back != want {
			t.Errorf("Append(%q) decodes to %q; want %q", give, back, want)
		}
	}
}

func FuzzAppend(f *testing.F) {
	for _, s := range []string{"", "plain", "quote \" back \\", "ctl \x00\x01\x1f\n\r\t", "<html> & \u2028\u2029", "héllo ✓ 🙂", "bad \xff utf8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		enc := Append(nil, s)
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		var got, ref string
		if err := json.Unmarshal(enc, &got); err != nil {
			t.Fatalf("Append(%q) = %s, not JSON: %v", s, enc, err)
		}
		_ = json.Unmarshal(want, &ref)
		if got != ref {
			t.Errorf("Append(%q) decodes to %q, encoding/json to %q", s, got, ref)
		}
	})
}
