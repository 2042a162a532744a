package provider

import (
	"io"
	"net/http"
	"strings"
	"testing"
)

func TestModelID(t *testing.T) {
	aliases := []Alias{{"claude-sonnet-4-5*", "us.anthropic.claude-sonnet-4-5-20250929-v1:0"}, {"claude-*", "other"}, {"gpt-4o", "gpt4o-prod"}}
	for give, want := range map[string]string{
		"claude-sonnet-4-5":          "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"claude-sonnet-4-5-20250929": "us.anthropic.claude-sonnet-4-5-20250929-v1:0", // the first match wins
		"claude-haiku-4-5":           "other",
		"gpt-4o":                     "gpt4o-prod",
		"gpt-4o-mini":                "gpt-4o-mini", // no alias: the client's name, a provider id itself
	} {
		if got := ModelID(aliases, give); got != want {
			t.Errorf("ModelID(%q) = %q; want %q", give, got, want)
		}
	}
	if got := RequestModel("", []byte(`{"model":"m1"}`)); got != "m1" {
		t.Errorf("RequestModel from the body = %q", got)
	}
	if got := RequestModel("routed", []byte(`{"model":"m1"}`)); got != "routed" {
		t.Errorf("RequestModel routed = %q", got)
	}
}

// The edits touch only the field they name: every other byte (an odd
// number literal, key order, spacing, escapes, a nested field of the same
// name) is the client's.
func TestEditsAreSurgical(t *testing.T) {
	body := []byte(`{"model": "claude-x", "odd": 1.50e+00,  "messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9","cache_control":{"type":"ephemeral","ttl":"1h"}}]}], "metadata":{"model":"keep"}, "stream":true}`)
	out, err := Delete(body, "model")
	if err != nil {
		t.Fatal(err)
	}
	out, err = Delete(out, "stream")
	if err != nil {
		t.Fatal(err)
	}
	// sjson leaves the space that followed the removed member: insignificant.
	want := `{ "odd": 1.50e+00,  "messages":[{"role":"user","content":[{"type":"text","text":"h\u00e9","cache_control":{"type":"ephemeral","ttl":"1h"}}]}], "metadata":{"model":"keep"}}`
	if string(out) != want {
		t.Errorf("after deleting model and stream:\n got %s\nwant %s", out, want)
	}
	set, err := SetString(body, "model", "gpt4o-prod")
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(string(body), `"claude-x"`, `"gpt4o-prod"`, 1); string(set) != want {
		t.Errorf("set model:\n got %s\nwant %s", set, want)
	}
	added, err := SetRaw([]byte(`{"a":1.0}`), "anthropic_beta", []byte(`["x","y"]`))
	if err != nil || string(added) != `{"a":1.0,"anthropic_beta":["x","y"]}` {
		t.Errorf("added field: %s %v", added, err)
	}
	same, err := Delete([]byte(`{"a":1}`), "stream")
	if err != nil || string(same) != `{"a":1}` {
		t.Errorf("delete of an absent field: %s %v", same, err)
	}
	if v := Field([]byte(`{"a.b":"dotted","a":{"b":"nested"}}`), "a.b"); v.String() != "dotted" {
		t.Errorf("a key with a dot is read as one key: %q", v.String())
	}
}

func TestErrorBody(t *testing.T) {
	e := CloudError{Status: 400, Message: `Malformed input "x"`, Code: "ValidationException"}
	if got, want := string(ErrorBody(Anthropic, e)), `{"type":"error","error":{"type":"invalid_request_error","message":"Malformed input \"x\""}}`; got != want {
		t.Errorf("anthropic:\n got %s\nwant %s", got, want)
	}
	if got, want := string(ErrorBody(OpenAI, e)), `{"error":{"message":"Malformed input \"x\"","type":"invalid_request_error","param":null,"code":"ValidationException"}}`; got != want {
		t.Errorf("openai:\n got %s\nwant %s", got, want)
	}
	for status, want := range map[int]string{429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error", 408: "timeout_error", 404: "not_found_error", 403: "permission_error", 500: "api_error"} {
		if got := anthropicType(status); got != want {
			t.Errorf("anthropicType(%d) = %s; want %s", status, got, want)
		}
	}
	if got := string(ErrorBody(OpenAI, CloudError{Status: 500, Message: "m"})); got != `{"error":{"message":"m","type":"server_error","param":null,"code":null}}` {
		t.Errorf("openai without a code: %s", got)
	}
}

func TestReshape(t *testing.T) {
	parse := func(status int, h http.Header, body []byte) (CloudError, bool) {
		if h.Get("X-Amzn-Errortype") == "" {
			return CloudError{}, false
		}
		return CloudError{Status: 429, Message: Field(body, "message").String(), Code: "ThrottlingException"}, true
	}
	mk := func(h http.Header, body string) *http.Response {
		h.Set("Content-Length", "999")
		return &http.Response{StatusCode: 400, Header: h, Body: io.NopCloser(strings.NewReader(body))}
	}
	resp := mk(http.Header{"X-Amzn-Errortype": {"ThrottlingException"}, "Retry-After": {"3"}}, `{"message":"slow down"}`)
	Reshape(resp, Anthropic, parse)
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 429 || string(got) != `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}` ||
		resp.Header.Get("Retry-After") != "3" || resp.Header.Get("Content-Length") != "74" || resp.ContentLength != 74 {
		t.Errorf("reshaped: %d %s %v", resp.StatusCode, got, resp.Header)
	}
	own := `{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}`
	resp = mk(http.Header{}, own)
	Reshape(resp, Anthropic, parse)
	if got, _ := io.ReadAll(resp.Body); resp.StatusCode != 400 || string(got) != own {
		t.Errorf("a body parse does not recognise is kept: %d %s", resp.StatusCode, got)
	}
}

func TestSDKQuery(t *testing.T) {
	for give, want := range map[string]string{
		"":                                     "",
		"beta=true":                            "beta=true",
		"userProject=other&beta=true&key=k":    "beta=true",
		"quotaUser=x&alt=json&access_token=t":  "",
		"X-Amz-Credential=a&X-Amz-Signature=b": "",
		"betas=1":                              "",
	} {
		if got := SDKQuery(give); got != want {
			t.Errorf("SDKQuery(%q) = %q; want %q", give, got, want)
		}
	}
	for id, want := range map[string]bool{"gpt4o-prod": true, ".": false, "..": false, "": false, "a\nb": false, "a/b": true} {
		if PathSegment(id) != want {
			t.Errorf("PathSegment(%q) = %v", id, !want)
		}
	}
}
