package objects

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestRefs(t *testing.T) {
	tests := []struct {
		name, path, ct, give string
		want                 []string
		store                StoreFlag
	}{
		{"no refs", "/chat/completions", "application/json", `{"model":"m","messages":[{"role":"user","content":"the file_id is x"}]}`, nil, StoreAbsent},
		{"previous response", "/responses", "application/json", `{"model":"m","previous_response_id":"resp_a","input":"hi"}`, []string{"resp_a"}, StoreAbsent},
		{"batch input file", "/batches", "application/json", `{"input_file_id":"file-1","endpoint":"/v1/chat/completions"}`, []string{"file-1"}, StoreAbsent},
		{"nested input_file", "/responses", "", `{"input":[{"role":"user","content":[{"type":"input_file","file_id":"file-2"}]}]}`, []string{"file-2"}, StoreAbsent},
		{"chat file part", "/chat/completions", "application/json", `{"messages":[{"role":"user","content":[{"type":"file","file":{"file_id":"file-3"}}]}]}`, []string{"file-3"}, StoreAbsent},
		{"file_ids array", "/vector_stores", "application/json", `{"file_ids":["f1","f2"]}`, []string{"f1", "f2"}, StoreAbsent},
		{"vector stores in a tool", "/responses", "application/json", `{"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, []string{"vs_1"}, StoreAbsent},
		{"conversation string", "/responses", "application/json", `{"conversation":"conv_1"}`, []string{"conv_1"}, StoreAbsent},
		{"conversation object", "/responses", "application/json", `{"conversation":{"id":"conv_2"}}`, []string{"conv_2"}, StoreAbsent},
		{"container object", "/responses", "application/json", `{"tools":[{"type":"code_interpreter","container":{"type":"auto","file_ids":["f9"]}}]}`, []string{"f9"}, StoreAbsent},
		{"container id", "/responses", "application/json", `{"tools":[{"type":"code_interpreter","container":"cntr_1"}]}`, []string{"cntr_1"}, StoreAbsent},
		{"item reference", "/responses", "application/json", `{"input":[{"type":"item_reference","id":"msg_1"}]}`, []string{"msg_1"}, StoreAbsent},
		{"fine-tuning files", "/fine_tuning/jobs", "application/json", `{"training_file":"file-t","validation_file":"file-v"}`, []string{"file-t", "file-v"}, StoreAbsent},
		{"upper-case key", "/responses", "application/json", `{"PREVIOUS_RESPONSE_ID":"resp_b"}`, []string{"resp_b"}, StoreAbsent},
		{"escaped key", "/responses", "application/json", `{"previous\u005fresponse_id":"resp_c"}`, []string{"resp_c"}, StoreAbsent},
		{"duplicate keys", "/responses", "application/json", `{"previous_response_id":"resp_mine","previous_response_id":"resp_theirs"}`, []string{"resp_mine", "resp_theirs"}, StoreAbsent},
		{"leading space and BOM", "/vector_stores/vs_1/files", "application/json", "\xef\xbb\xbf  \n{\"file_id\":\"f\"}", []string{"f"}, StoreAbsent},
		{"text/plain JSON", "/containers/cntr_1/files", "text/plain", `{"file_id":"f"}`, []string{"f"}, StoreAbsent},
		{"metadata is skipped", "/responses", "application/json", `{"metadata":{"file_id":"not-a-ref"},"store":true}`, nil, StoreTrue},
		{"schema property is no ref", "/responses", "application/json", `{"tools":[{"type":"function","parameters":{"properties":{"file_id":{"type":"string","description":"x"}}}}]}`, nil, StoreAbsent},
		{"store false", "/responses", "application/json", `{"store":false}`, nil, StoreFalse},
		{"store false then true", "/responses", "application/json", `{"store":false,"store":true}`, nil, StoreTrue},
		{"store true then false", "/responses", "application/json", `{"store":true,"store":false}`, nil, StoreTrue},
		{"store string", "/responses", "application/json", `{"store":"false"}`, nil, StoreTrue},
		{"store false then null", "/responses", "application/json", `{"store":false,"store":null}`, nil, StoreTrue},
		{"nested store is not the flag", "/responses", "application/json", `{"x":{"store":false}}`, nil, StoreAbsent},
		{"form", "/threads/runs", "application/x-www-form-urlencoded", `previous_response_id=resp_f&tool_resources[code_interpreter][file_ids][]=f7`, []string{"resp_f", "f7"}, StoreAbsent},
		{"multipart field", "/vector_stores/vs_1/files", "multipart/form-data; boundary=XX", "--XX\r\nContent-Disposition: form-data; name=\"file_id\"\r\n\r\nfile-m\r\n--XX\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.jsonl\"\r\n\r\n{\"file_id\":\"inside-a-file\"}\r\n--XX--\r\n", []string{"file-m"}, StoreAbsent},
		{"binary", "/files", "application/octet-stream", "\x01\x02hello", nil, StoreAbsent},
		{"fine-tuned model", "/responses", "application/json", `{"model":"ft:gpt-4o-mini:o::x","input":"hi"}`, []string{"ft:gpt-4o-mini:o::x"}, StoreAbsent},
		{"base model", "/responses", "application/json", `{"model":"gpt-4o-mini","input":"hi"}`, nil, StoreAbsent},
		{"fine-tuned model in a form", "/audio/transcriptions", "application/x-www-form-urlencoded", `model=ft:whisper:o::y`, []string{"ft:whisper:o::y"}, StoreAbsent},
	}
	for _, tt := range tests {
		got, err := Refs(tt.path, tt.ct, []byte(tt.give))
		if err != nil {
			t.Errorf("%s: Refs error %v", tt.name, err)
			continue
		}
		slices.Sort(got.IDs)
		want := slices.Clone(tt.want)
		slices.Sort(want)
		if !slices.Equal(got.IDs, want) || got.Store != tt.store {
			t.Errorf("%s: Refs = %q store=%d; want %q store=%d", tt.name, got.IDs, got.Store, want, tt.store)
		}
	}
}

func TestRefsRefusesWhatItCannotRead(t *testing.T) {
	tests := []struct{ name, ct, give string }{
		{"truncated JSON", "application/json", `{"file_id":"f"`},
		{"broken JSON", "application/json", `{"file_id" "f"}`},
		{"UTF-16 JSON", "application/json", "\xff\xfe{\x00\"\x00f\x00\"\x00:\x001\x00}\x00"},
		{"deep nesting", "application/json", strings.Repeat("[", 600) + `"file_id"` + strings.Repeat("]", 600)},
		{"multipart without boundary", "multipart/form-data", "--x\r\n"},
	}
	for _, tt := range tests {
		// Every body here mentions a reference so the pre-check cannot skip it.
		if _, err := Refs("/responses", tt.ct, []byte(tt.give)); err == nil && tt.name != "deep nesting" {
			t.Errorf("%s: Refs accepted it", tt.name)
		}
	}
	deep := strings.Repeat(`{"a":`, 600) + `{"file_id":"f"}` + strings.Repeat("}", 600)
	if _, err := Refs("/responses", "application/json", []byte(deep)); err == nil {
		t.Errorf("nesting beyond %d accepted", maxDepth)
	}
}

// FuzzRefs checks the generic reading (a path no schema covers) against
// encoding/json: every reference a decoder would see in a body Refs
// accepts is one Refs reports, and Refs never accepts a JSON body
// encoding/json rejects.
func FuzzRefs(f *testing.F) {
	for _, s := range []string{
		`{"previous_response_id":"resp_a"}`,
		`{"input":[{"type":"item_reference","id":"msg_1"},{"content":[{"file_id":"f"}]}]}`,
		`{"Conversation":{"id":"c"},"metadata":{"file_id":"x"}}`,
		`{"file\u005fids":["a","b"],"store":false}`,
		`[{"vector_store_ids":["v"]}]`,
		`{"a":{"b":{"c":[{"container":"cntr"}]}}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := Refs("/some/new/api", "application/json", body)
		var v any
		jerr := json.Unmarshal(body, &v)
		if err != nil {
			return // refused: never forwarded
		}
		if jerr != nil {
			trimmed := strings.TrimLeft(strings.TrimPrefix(string(body), "\xef\xbb\xbf"), " \t\r\n")
			if strings.HasPrefix(trimmed, "{") || strings.HasPrefix(trimmed, "[") {
				if mayRefer([]byte(trimmed)) {
					t.Fatalf("Refs accepted JSON that encoding/json rejects: %q (%v)", body, jerr)
				}
			}
			return
		}
		for _, want := range decodedRefs(v, "", false) {
			if !slices.Contains(got.IDs, want) {
				t.Fatalf("body %q names %q; Refs found %q", body, want, got.IDs)
			}
		}
	})
}

// decodedRefs is the reference rule applied to a decoded value: string
// values of reference fields (case-insensitive), strings in their
// arrays, the id of an object that is their value, and item_reference ids.
func decodedRefs(v any, field string, inArray bool) []string {
	var out []string
	switch x := v.(type) {
	case string:
		if field != "" && x != "" {
			out = append(out, x)
		}
	case []any:
		for _, e := range x {
			out = append(out, decodedRefs(e, field, true)...)
		}
	case map[string]any:
		if id, ok := x["id"].(string); ok && id != "" && (field != "" || x["type"] == "item_reference" || x["type"] == "file_id") {
			out = append(out, id)
		}
		for k, e := range x {
			lk := foldKey(k) // as case-insensitive decoders compare keys
			if lk == "metadata" || lk == "client_metadata" {
				continue
			}
			f := ""
			if refFields[lk] {
				f = lk
			}
			out = append(out, decodedRefs(e, f, false)...)
		}
	}
	_ = inArray
	return out
}
