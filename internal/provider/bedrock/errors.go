package bedrock

import (
	"net/http"
	"strings"

	"github.com/tidwall/gjson"

	"github.com/corralhq/corral/internal/provider"
)

// parseError reads Bedrock's error answer: {"message":"..."} (or
// "Message"), the exception's name in the x-amzn-ErrorType header
// ("ThrottlingException:http://internal.amazon.com/coral/..."), else in
// the body's "__type" or "code". The status stays Bedrock's: a refusal
// of Corral's credentials (AccessDeniedException, UnrecognizedClient-,
// InvalidSignature-, ExpiredTokenException: 403) stays 403, which the
// server answers as 502 and the router counts against the upstream. A
// body already in an API's shape (the OpenAI-compatible endpoint's
// {"error":{...}}) is not Bedrock's and is left as it is.
func parseError(status int, h http.Header, body []byte) (provider.CloudError, bool) {
	if !gjson.ValidBytes(body) && h.Get("X-Amzn-Errortype") == "" {
		return provider.CloudError{}, false
	}
	doc := gjson.ParseBytes(body)
	if doc.Get("error").IsObject() {
		return provider.CloudError{}, false
	}
	msg := doc.Get("message")
	if !msg.Exists() {
		msg = doc.Get("Message")
	}
	code := errorType(h.Get("X-Amzn-Errortype"))
	if code == "" {
		code = errorType(doc.Get("__type").String())
	}
	if code == "" {
		code = doc.Get("code").String()
	}
	if !msg.Exists() && code == "" {
		return provider.CloudError{}, false
	}
	m := msg.String()
	if m == "" {
		m = code
	}
	return provider.CloudError{Status: status, Message: m, Code: code}, true
}

// errorType is the exception's name in an x-amzn-ErrorType value or a
// "__type" ("com.amazon.coral.service#ExpiredTokenException"): what comes
// after a '#', before a ':'.
func errorType(v string) string {
	if i := strings.LastIndexByte(v, '#'); i >= 0 {
		v = v[i+1:]
	}
	if i := strings.IndexByte(v, ':'); i >= 0 {
		v = v[:i]
	}
	return strings.TrimSpace(v)
}

// exceptionStatus is the HTTP status an event stream's exception stands
// for: the status Bedrock's API model gives each exception, so that an
// exception before the first event fails over exactly as the same error
// answered with a status would. modelStreamErrorException is 424 in the
// model, a model that broke while answering: it is transient, so it is
// treated as 500 and fails over; an unknown exception is 500 too.
func exceptionStatus(name string) int {
	switch strings.ToLower(strings.TrimSuffix(name, "Exception")) {
	case "throttling", "modelnotready":
		return http.StatusTooManyRequests
	case "serviceunavailable":
		return http.StatusServiceUnavailable
	case "modeltimeout":
		return http.StatusRequestTimeout
	case "validation", "servicequotaexceeded":
		return http.StatusBadRequest
	case "accessdenied":
		return http.StatusForbidden
	case "resourcenotfound":
		return http.StatusNotFound
	case "modelerror":
		return http.StatusFailedDependency
	}
	return http.StatusInternalServerError
}

// badRequest is a 400 in api's shape for a request the envelope cannot
// send (no model, a body that is not JSON). It never reached Bedrock.
func badRequest(api, msg string) *http.Response {
	resp := &http.Response{StatusCode: http.StatusBadRequest, Status: "400 Bad Request",
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{"Content-Type": {"application/json"}}}
	provider.Replace(resp, provider.ErrorBody(api, provider.CloudError{Status: http.StatusBadRequest, Message: msg}))
	return resp
}
