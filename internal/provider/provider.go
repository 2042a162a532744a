// Package provider is what Corral's cloud envelopes share: Azure OpenAI,
// Amazon Bedrock and Google Vertex AI (one package each below it) take
// the client's OpenAI or Anthropic request as the client wrote it and
// change only its envelope, as each cloud's official SDK does: the URL,
// the model (an alias, or carried in the path), a few top-level body
// fields, the credentials, and the stream framing and error shape of the
// answer. Every other byte of a body is the client's.
//
// Each cloud's Client is a failover.Doer (and failover.Scoped: it serves
// only the endpoints its cloud has), so the router, the cache and the
// flights see an upstream like any other: one prompt is one key whichever
// cloud answers it.
package provider

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/tidwall/gjson"
	"github.com/tidwall/sjson"

	"github.com/corralhq/corral/internal/wire/anthropic"
)

// APIs a cloud upstream may serve, as the upstreams file names them.
const (
	OpenAI    = "openai"
	Anthropic = "anthropic"
)

// Alias maps the client model names Glob (path.Match syntax) matches to
// the provider's model id.
type Alias struct{ Glob, ID string }

// ModelID is the provider's id for the client's model: the first alias
// whose glob matches it, else the model itself (a client may name a
// provider's id directly).
func ModelID(aliases []Alias, model string) string {
	for _, a := range aliases {
		if ok, _ := path.Match(a.Glob, model); ok {
			return a.ID
		}
	}
	return model
}

// RequestModel is the model a call is for: the one the router chose the
// upstream for, else the body's top-level "model".
func RequestModel(routed string, body []byte) string {
	if routed != "" {
		return routed
	}
	return gjson.GetBytes(body, "model").String()
}

// Field reads body's top-level field name (gjson.Result's zero value when
// absent or body is not JSON).
func Field(body []byte, name string) gjson.Result {
	return gjson.GetBytes(body, gjsonKey(name))
}

// SetRaw returns body with its top-level field name set to the JSON
// value raw: replaced in place when present, else added. Every other byte
// stays as it was (no re-encoding: unknown fields, number literals and
// key order survive).
func SetRaw(body []byte, name string, raw []byte) ([]byte, error) {
	return sjson.SetRawBytesOptions(body, gjsonKey(name), raw, &sjson.Options{Optimistic: false, ReplaceInPlace: false})
}

// SetString is SetRaw with a JSON string value.
func SetString(body []byte, name, value string) ([]byte, error) {
	raw, _ := json.Marshal(value)
	return SetRaw(body, name, raw)
}

// Delete returns body without its top-level field name (body itself
// when there is none). Every other byte stays as it was.
func Delete(body []byte, name string) ([]byte, error) {
	if !Field(body, name).Exists() {
		return body, nil
	}
	return sjson.DeleteBytes(body, gjsonKey(name))
}

// gjsonKey escapes the path syntax gjson and sjson read in a key.
func gjsonKey(name string) string {
	var b strings.Builder
	for _, c := range name {
		if strings.ContainsRune(`.*?|#@!\`, c) {
			b.WriteByte('\\')
		}
		b.WriteRune(c)
	}
	return b.String()
}

// CloudError is what a cloud's error answer said, to be told to the
// client in its own API's shape.
type CloudError struct {
	// Status is the HTTP status the client gets (the cloud's, or the one
	// an exception's type stands for).
	Status int
	// Message is the cloud's message. Clouds do not put credentials in
	// their messages; Corral passes them on as the cloud wrote them.
	Message string
	// Code is the cloud's code (Bedrock's exception name, Google's
	// status), sent as OpenAI's "code".
	Code string
}

// ErrorBody renders e in api's error shape: OpenAI's
// {"error":{"message","type","param":null,"code"}} or Anthropic's
// {"type":"error","error":{"type","message"}}, the type following the
// status as each API's own servers choose it.
func ErrorBody(api string, e CloudError) []byte {
	if api == Anthropic {
		b, _ := json.Marshal(struct {
			Type  string `json:"type"`
			Error struct {
				Type    string `json:"type"`
				Message string `json:"message"`
			} `json:"error"`
		}{Type: "error", Error: struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		}{Type: anthropicType(e.Status), Message: e.Message}})
		return b
	}
	type detail struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	d := detail{Message: e.Message, Type: OpenAIType(e.Status)}
	if e.Code != "" {
		d.Code = &e.Code
	}
	b, _ := json.Marshal(struct {
		Error detail `json:"error"`
	}{d})
	return b
}

// anthropicType is Anthropic's error type for status: what Anthropic's
// own servers answer with (wire/anthropic's, which Corral's own errors
// use), except where a cloud's status means what another of Anthropic's
// types says (a 503 is Bedrock's or Google's "overloaded", a 408 a model
// that ran out of time, a 422 a request the model cannot take).
func anthropicType(status int) string {
	switch status {
	case http.StatusServiceUnavailable:
		return "overloaded_error"
	case http.StatusRequestTimeout:
		return "timeout_error"
	case http.StatusUnprocessableEntity:
		return "invalid_request_error"
	}
	return anthropic.ErrorType(status)
}

// OpenAIType is OpenAI's error type for status, as OpenAI's servers
// choose it.
func OpenAIType(status int) string {
	switch {
	case status == http.StatusUnauthorized:
		return "authentication_error"
	case status == http.StatusForbidden:
		return "permission_error"
	case status == http.StatusTooManyRequests:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// maxErrorBody bounds what is read of a cloud's error answer.
const maxErrorBody = 64 << 10

// Reshape replaces the body of resp, an error answer (status ≥ 400), with
// api's error shape when parse recognises the cloud's own (ok); the status
// and every header but the body's length and type stay, so Retry-After and
// the request ids reach the client. A body parse does not recognise (one
// already in the API's shape, say) is put back as it was. A body longer
// than the bound is cut at it before parse sees it.
func Reshape(resp *http.Response, api string, parse func(status int, h http.Header, body []byte) (CloudError, bool)) {
	if resp.StatusCode < 400 {
		return
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if e, ok := parse(resp.StatusCode, resp.Header, body); ok {
		if e.Status == 0 {
			e.Status = resp.StatusCode
		}
		resp.StatusCode = e.Status
		resp.Status = strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
		body = ErrorBody(api, e)
		resp.Header.Set("Content-Type", "application/json")
	}
	Replace(resp, body)
}

// Replace makes body resp's whole body, with its length set.
func Replace(resp *http.Response, body []byte) {
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	resp.Header.Del("Content-Encoding")
}

// SDKQuery is the part of a client's query string the clouds' runtime APIs
// are sent: only beta, which anthropic-sdk-go's beta Messages calls add
// (?beta=true) and carry to Bedrock and Vertex. Every other parameter is
// dropped: Google reads userProject, quotaUser, key, access_token and alt
// from a query (another project's billing or quota, another credential,
// another stream framing), AWS its X-Amz-* query authentication, and no
// client may set those for Corral's account.
func SDKQuery(raw string) string {
	out := ""
	for p := range strings.SplitSeq(raw, "&") {
		if k, _, _ := strings.Cut(p, "="); k == "beta" {
			if out != "" {
				out += "&"
			}
			out += p
		}
	}
	return out
}

// PathSegment reports whether id can stand as one segment of a cloud's
// path: not empty, not a dot segment (which a server would resolve to
// the parent), no control characters.
func PathSegment(id string) bool {
	if id == "" || id == "." || id == ".." {
		return false
	}
	for _, c := range id {
		if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}
