package azure

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"

	"github.com/corralhq/corral/internal/provider"
)

// maxErrorBody bounds what is read of Azure's error answer.
const maxErrorBody = 64 << 10

// azureError is what Azure OpenAI answers an error with: OpenAI's
// envelope with Azure's codes (DeploymentNotFound, content_filter with an
// innererror naming the filter's verdicts, "429" as a string, ...), and
// "type" and "param" often null or absent. API Management in front of a
// resource answers {"statusCode":401,"message":...} instead.
type azureError struct {
	Error *struct {
		Code       json.RawMessage `json:"code"`
		Message    string          `json:"message"`
		Type       *string         `json:"type"`
		Param      *string         `json:"param"`
		InnerError json.RawMessage `json:"innererror,omitempty"`
	} `json:"error"`
	StatusCode int    `json:"statusCode"`
	Message    string `json:"message"`
}

// openAIError is OpenAI's error shape, with Azure's innererror carried
// through: clients of Azure's content filters read its verdicts there,
// and OpenAI's SDKs ignore fields they do not know.
type openAIError struct {
	Error openAIDetail `json:"error"`
}

type openAIDetail struct {
	Message    string          `json:"message"`
	Type       string          `json:"type"`
	Param      *string         `json:"param"`
	Code       *string         `json:"code"`
	InnerError json.RawMessage `json:"innererror,omitempty"`
}

// reshape turns resp's Azure error body into OpenAI's shape, keeping the
// status and every header (Retry-After, retry-after-ms, x-ratelimit-*: the
// server decides what the client sees). A body that is not Azure's error
// shape is passed on as it came.
func reshape(resp *http.Response) {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	resp.Body.Close()
	if out, ok := openAIErrorBody(resp.StatusCode, body); ok {
		body = out
		resp.Header.Set("Content-Type", "application/json")
	}
	provider.Replace(resp, body)
}

// openAIErrorBody is Azure's error body in OpenAI's shape, for status.
func openAIErrorBody(status int, body []byte) ([]byte, bool) {
	var a azureError
	if json.Unmarshal(body, &a) != nil {
		return nil, false
	}
	d := openAIDetail{Type: provider.OpenAIType(status)}
	switch {
	case a.Error != nil && a.Error.Message != "":
		e := a.Error
		d.Message, d.Param, d.InnerError = e.Message, e.Param, e.InnerError
		if e.Type != nil && *e.Type != "" {
			d.Type = *e.Type
		}
		if code := codeText(e.Code); code != "" {
			d.Code = &code
		}
	case a.Error == nil && a.Message != "":
		d.Message = a.Message
	default:
		return nil, false
	}
	out, err := json.Marshal(openAIError{d})
	return out, err == nil
}

// codeText is Azure's code as a string: "DeploymentNotFound", or "429"
// where Azure sends the status (sometimes as a JSON number).
func codeText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var n json.Number
	if json.Unmarshal(raw, &n) == nil {
		return n.String()
	}
	return ""
}

// badRequest is a 400 in OpenAI's shape that Corral answers itself,
// never sent to Azure (a deployment-scoped call without a model).
func badRequest(msg string) *http.Response {
	b, _ := json.Marshal(openAIError{openAIDetail{Message: msg, Type: "invalid_request_error"}})
	resp := &http.Response{StatusCode: http.StatusBadRequest, Status: strconv.Itoa(http.StatusBadRequest) + " " + http.StatusText(http.StatusBadRequest),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}}}
	provider.Replace(resp, b)
	return resp
}
