package objects

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// TestRefsFoldsKeysLikeEncodingJSON: encoding/json matches a struct
// field's key under ToUpper(ToLower(r)) per rune, so "previouſ_reſponſe_id"
// (U+017F) is previous_response_id to a Go upstream. Corral must see it too.
func TestRefsFoldsKeysLikeEncodingJSON(t *testing.T) {
	body := `{"model":"m","previou` + "\u017f" + `_re` + "\u017f" + `pon` + "\u017f" + `e_id":"resp_A","input":"hi"}`
	var up struct {
		Prev string `json:"previous_response_id"`
	}
	if err := json.Unmarshal([]byte(body), &up); err != nil || up.Prev != "resp_A" {
		t.Fatalf("precondition: encoding/json reads %q (%v)", up.Prev, err)
	}
	got, err := Refs("/responses", "application/json", []byte(body))
	if err != nil || !slices.Contains(got.IDs, "resp_A") {
		t.Errorf("Refs = %q, %v; want resp_A (the key folds to previous_response_id)", got.IDs, err)
	}
	st, err := Refs("/responses", "application/json", []byte(`{"`+"\u017f"+`tore":true}`))
	if err != nil || st.Store != StoreTrue {
		t.Errorf("folded store = %d, %v; want StoreTrue", st.Store, err)
	}
}

// TestRefsReadsEveryWayTheUpstreamMight covers the body-format
// differentials: a JSON body sent as a form (many upstreams decode JSON
// whatever the Content-Type), a form body hidden inside valid JSON, a
// Content-Type Go cannot parse, indexed form arrays, and multipart parts
// that claim to be files.
func TestRefsReadsEveryWayTheUpstreamMight(t *testing.T) {
	tests := []struct {
		name, ct, give string
		want           string
	}{
		{"JSON sent as a form", "application/x-www-form-urlencoded", `{"previous_response_id":"resp_A"}`, "resp_A"},
		{"form inside JSON", "application/x-www-form-urlencoded", `{"x":"&previous_response_id=resp_A&"}`, "resp_A"},
		{"indexed form array", "application/x-www-form-urlencoded", `file_ids[0]=file-A`, "file-A"},
		{"form object id", "application/x-www-form-urlencoded", `conversation[id]=conv_A`, "conv_A"},
		{"multipart ref part with a filename", "multipart/form-data; boundary=XX",
			"--XX\r\nContent-Disposition: form-data; name=\"file_id\"; filename=\"id.txt\"\r\n\r\nfile-A\r\n--XX--\r\n", "file-A"},
	}
	for _, tt := range tests {
		got, err := Refs("/responses", tt.ct, []byte(tt.give))
		if err != nil || !slices.Contains(got.IDs, tt.want) {
			t.Errorf("%s: Refs = %q, %v; want %s among them", tt.name, got.IDs, err, tt.want)
		}
	}
	for _, ct := range []string{
		"multipart/form-data; boundary=XX; boundary=YY",
		"application/x-www-form-urlencoded; charset=a; charset=b",
	} {
		if _, err := Refs("/responses", ct, []byte("previous_response_id=resp_A")); !errors.Is(err, ErrBody) {
			t.Errorf("Content-Type %q: err = %v; want ErrBody", ct, err)
		}
	}
	if got, _ := Refs("/responses", "application/x-www-form-urlencoded", []byte(`metadata[file_id]=mine`)); len(got.IDs) != 0 {
		t.Errorf("metadata form field = %q; want no refs", got.IDs)
	}
}

// TestRefsFindsStoredObjectQueries: an eval over stored completions or
// stored responses selects objects by filter across the whole upstream
// account, every tenant's included.
func TestRefsFindsStoredObjectQueries(t *testing.T) {
	for _, tt := range []struct{ path, give string }{
		{"/evals/eval_1/runs", `{"data_source":{"type":"completions","source":{"type":"stored_completions","limit":100}}}`},
		{"/evals/eval_1/runs", `{"data_source":{"type":"responses","source":{"type":"responses","metadata":{"a":"b"}}}}`},
		{"/evals", `{"name":"e","data_source_config":{"type":"stored_completions"},"testing_criteria":[]}`},
		{"/evals", `{"data_source_config":{"type":"logs"}}`},
		{"/evals/eval_1/runs", `{"data_source":{"type":"completions","Source":{"type":"stored_completions"}}}`},
		{"/some/new/api", `{"x":{"source":{"type":"stored_completions"}}}`},
	} {
		got, err := Refs(tt.path, "application/json", []byte(tt.give))
		if err != nil || got.Query == "" {
			t.Errorf("%s %s: Query = %q, %v; want it found", tt.path, tt.give, got.Query, err)
		}
	}
	for _, tt := range []struct{ path, give string }{
		{"/evals/eval_1/runs", `{"data_source":{"type":"jsonl","source":{"type":"file_id","id":"file-1"}}}`},
		{"/evals", `{"data_source_config":{"type":"custom","item_schema":{}}}`},
		{"/chat/completions", `{"messages":[{"role":"user","content":"source: stored_completions"}]}`},
		// A tool's input is the model's, whatever it looks like.
		{"/messages", `{"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"db","input":{"source":{"type":"responses"}}}]}]}`},
	} {
		if got, err := Refs(tt.path, "application/json", []byte(tt.give)); err != nil || got.Query != "" {
			t.Errorf("%s %s: Query = %q, %v; want none", tt.path, tt.give, got.Query, err)
		}
	}
}

// TestRefsStopsAtMaxRefs: a body naming more than MaxRefs references is
// refused as soon as the walk passes that many.
func TestRefsStopsAtMaxRefs(t *testing.T) {
	body := `{"file_ids":[` + strings.Repeat(`"f",`, MaxRefs) + `"f"]}`
	if _, err := Refs("/vector_stores", "application/json", []byte(body)); !errors.Is(err, ErrTooMany) {
		t.Errorf("err = %v; want ErrTooMany", err)
	}
}

// TestRefsEvalFileSource: an eval run's data source names its file as
// {"type": "file_id", "id": ...}; the id is not under a reference field,
// so it went unchecked and a run over another tenant's file showed its
// lines in the run's output items.
func TestRefsEvalFileSource(t *testing.T) {
	body := `{"data_source":{"type":"jsonl","source":{"type":"file_id","id":"file-A"}}}`
	got, err := Refs("/evals/eval_1/runs", "application/json", []byte(body))
	if err != nil || !slices.Contains(got.IDs, "file-A") {
		t.Errorf("Refs = %q, %v; want file-A", got.IDs, err)
	}
}
