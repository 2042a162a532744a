package mockllm

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
)

// errorKind is how OpenAI shapes one error status.
type errorKind struct {
	typ, code string
	message   string // "{model}" is replaced by the request's model
}

// errorKinds maps the injectable statuses to their error bodies: mock-<status>
// is a model that answers with one. Types and codes follow OpenAI's where
// OpenAI has one; the mock always sets a code, so a test can match on it.
var errorKinds = map[int]errorKind{
	400: {"invalid_request_error", "invalid_request", "Invalid request for model `{model}`."},
	401: {"invalid_request_error", "invalid_api_key", "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."},
	403: {"permission_error", "permission_denied", "You are not allowed to use model `{model}`."},
	404: {"invalid_request_error", "model_not_found", "The model `{model}` does not exist or you do not have access to it."},
	408: {"timeout_error", "request_timeout", "Request timed out for model `{model}`."},
	409: {"conflict_error", "conflict", "The request for model `{model}` conflicts with another request."},
	422: {"invalid_request_error", "unprocessable_entity", "The request for model `{model}` could not be processed."},
	429: {"requests", "rate_limit_exceeded", "Rate limit reached for {model} on requests per min (RPM): Limit 1, Used 1, Requested 1. Please try again in 1s."},
	500: {"server_error", "server_error", "The server had an error while processing your request. Sorry about that!"},
	502: {"server_error", "bad_gateway", "Bad gateway."},
	503: {"server_error", "service_unavailable", "The server is overloaded or not ready yet."},
}

// injectable reports whether mock-<status> is a model with an injected
// error.
func injectable(status int) bool {
	_, ok := errorKinds[status]
	return ok
}

// kindFor returns the error shape of any status, for the status override.
func kindFor(status int) errorKind {
	if k, ok := errorKinds[status]; ok {
		return k
	}
	msg := "Injected error " + strconv.Itoa(status) + " for model `{model}`."
	if status < 500 {
		return errorKind{"invalid_request_error", "mock_error", msg}
	}
	return errorKind{"server_error", "mock_error", msg}
}

// writeStatus writes the error answer of status for model and counts it.
func (s *Server) writeStatus(w http.ResponseWriter, status int, model string) {
	k := kindFor(status)
	s.writeError(w, status, k, strings.ReplaceAll(k.message, "{model}", model), "")
}

// requestError is a 400 about the request body. Its message is shown to
// the client as is, in OpenAI's wording, hence capitals and full stops.
type requestError struct {
	param   string // offending body field, or ""
	message string
}

func (e *requestError) Error() string { return e.message }

func badRequest(param, message string) error {
	return &requestError{param: param, message: message}
}

// writeRequestError writes err, a *requestError, as a 400.
func (s *Server) writeRequestError(w http.ResponseWriter, err error) {
	var re *requestError
	if !errors.As(err, &re) {
		re = &requestError{message: err.Error()}
	}
	s.writeBadRequest(w, re.message, re.param)
}

// writeBadRequest writes a 400 about the request itself; param names the
// offending field, if any.
func (s *Server) writeBadRequest(w http.ResponseWriter, message, param string) {
	s.writeError(w, http.StatusBadRequest, errorKind{typ: "invalid_request_error", code: "invalid_request"}, message, param)
}

// writeError writes an OpenAI error answer and counts it.
func (s *Server) writeError(w http.ResponseWriter, status int, k errorKind, message, param string) {
	s.stats.errors.Add(1)
	writeErrorBody(w, status, k, message, param)
}

var (
	kindNotFound    = errorKind{typ: "invalid_request_error", code: "unknown_url"}
	kindBadMethod   = errorKind{typ: "invalid_request_error", code: "method_not_allowed"}
	kindTooLarge    = errorKind{typ: "invalid_request_error", code: "request_too_large"}
	msgTooLarge     = "The request body is larger than " + strconv.Itoa(maxBodyBytes) + " bytes."
	msgBadMethod    = "Method not allowed."
	msgMissingModel = "You must provide a model parameter."
)

// unknownURL is the message of a 404 for a path the mock does not serve,
// worded as OpenAI's.
func unknownURL(r *http.Request) string {
	return "Invalid URL (" + r.Method + " " + r.URL.Path + ")"
}

type errorBody struct {
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

func writeErrorBody(w http.ResponseWriter, status int, k errorKind, message, param string) {
	d := errorDetail{Message: message, Type: k.typ, Code: k.code}
	if param != "" {
		d.Param = &param
	}
	b := mustMarshal(errorBody{Error: d})

	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	if status == http.StatusTooManyRequests {
		h.Set("Retry-After", "1")
		h.Set("retry-after-ms", "1000")
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
