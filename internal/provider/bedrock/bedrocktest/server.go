// Package bedrocktest is a fake Amazon Bedrock runtime for tests, faithful
// to its wire format where Corral meets it: InvokeModel and
// InvokeModelWithResponseStream for Claude (a real binary event stream,
// chunk events carrying base64 Anthropic events, exception frames), and
// the OpenAI-compatible chat completions endpoint. It checks what Bedrock
// checks before a model sees a request: a SigV4 signature it recomputes
// itself with the secret it knows (or a Bedrock API key as a bearer
// token), then the Claude body's envelope (anthropic_version present,
// model and stream absent). Refusals carry Bedrock's {"message":...} body
// and x-amzn-ErrorType header. It records every request and can be told
// to answer with an error, an exception frame first, or one mid-stream.
//
// anthropic-sdk-go's own bedrock client talks to it (its tests prove it),
// so what passes here is what the SDK sends to the real service.
package bedrocktest

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Defaults of Options: the fake's one AWS key and region.
const (
	DefaultAccessKeyID     = "AKIAFAKEBEDROCK00001"
	DefaultSecretAccessKey = "fake/Bedrock+Secret0Key1ForTests2Only3xyz"
	DefaultRegion          = "us-east-1"
)

// Options configure the fake. Zero values take the defaults above.
type Options struct {
	// Region is the region signatures must be scoped to.
	Region string
	// AccessKeyID and SecretAccessKey are the one AWS key the fake knows.
	AccessKeyID, SecretAccessKey string
	// SessionToken, when set, must come as X-Amz-Security-Token, signed.
	SessionToken string
	// APIKey, when set, is a Bedrock API key accepted as
	// "Authorization: Bearer <key>" instead of a signature.
	APIKey string
	// Models, when set, are the only model ids the fake serves; any other
	// is Bedrock's 400 ValidationException.
	Models []string
	// AnswerModel is the "model" Claude's answers name. Default
	// "claude-sonnet-4-5-20250929".
	AnswerModel string
	// Reply chooses how each accepted call is answered; nil answers every
	// call normally.
	Reply func(Call) Reply
	// Now is the fake's clock for signature dates. Default time.Now.
	Now func() time.Time
}

// Call is one request the fake received, as it came.
type Call struct {
	Method string
	// Path is the path as sent on the wire, escaped; Model is the model
	// id decoded from it (Claude's paths) or from the body (OpenAI's).
	Path, Query string
	Model       string
	// Stream says it was InvokeModelWithResponseStream (or an OpenAI
	// call with "stream": true).
	Stream bool
	Header http.Header
	Body   []byte
}

// Reply is how the fake answers one call. The zero value is a normal
// answer.
type Reply struct {
	// Status ≥ 400 answers with Bedrock's error: Error names the exception
	// (x-amzn-ErrorType, e.g. "ThrottlingException"), Message its text.
	Status         int
	Error, Message string
	// RetryAfter, when set, is sent as Retry-After.
	RetryAfter string
	// Exception ends a stream with an exception frame of that name
	// ("throttlingException", "modelStreamErrorException") after
	// ExceptionAfter chunk events (0: before any).
	Exception      string
	ExceptionAfter int
	// Text is the answer's text. Default "bedrock reply to: <prompt>".
	Text string
	// Hold, when set, pauses a stream after its first text delta until it
	// is closed (or the caller leaves): live followers can be seen
	// reading a stream that has not ended.
	Hold <-chan struct{}
}

// Server is a running fake. Its URL is the runtime endpoint (no path).
type Server struct {
	*httptest.Server
	o Options

	mu    sync.Mutex // guards calls
	calls []Call
}

// New starts a fake with o, closed when the test ends.
func New(tb testing.TB, o Options) *Server {
	tb.Helper()
	s := NewUnstarted(o)
	s.Start()
	tb.Cleanup(s.Close)
	return s
}

// NewUnstarted returns a fake with o that is not listening yet (Start
// it; the caller closes it).
func NewUnstarted(o Options) *Server {
	if o.Region == "" {
		o.Region = DefaultRegion
	}
	if o.AccessKeyID == "" {
		o.AccessKeyID = DefaultAccessKeyID
	}
	if o.SecretAccessKey == "" {
		o.SecretAccessKey = DefaultSecretAccessKey
	}
	if o.AnswerModel == "" {
		o.AnswerModel = "claude-sonnet-4-5-20250929"
	}
	s := &Server{o: o}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	return s
}

// Calls returns every request received so far, in order.
func (s *Server) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Call(nil), s.calls...)
}

// Count is how many requests the fake has received.
func (s *Server) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *Server) now() time.Time {
	if s.o.Now != nil {
		return s.o.Now()
	}
	return time.Now()
}

// serve routes one request: authenticate, record, then the operation.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path, query, _ := strings.Cut(r.RequestURI, "?")
	c := Call{Method: r.Method, Path: path, Query: query, Header: r.Header.Clone(), Body: body}
	op := ""
	switch {
	case r.Method == http.MethodPost && path == "/openai/v1/chat/completions":
		op = "openai"
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/model/"):
		seg, rest, _ := strings.Cut(strings.TrimPrefix(path, "/model/"), "/")
		id, err := url.PathUnescape(seg)
		if err == nil && (rest == "invoke" || rest == "invoke-with-response-stream") {
			op, c.Model, c.Stream = rest, id, rest != "invoke"
		}
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()

	if e := s.authenticate(r, body); e != nil {
		writeError(w, http.StatusForbidden, e.name, e.message, "")
		return
	}
	switch op {
	case "openai":
		s.openAI(w, r, c)
	case "invoke", "invoke-with-response-stream":
		s.claude(w, r, c)
	default:
		writeError(w, http.StatusNotFound, "UnknownOperationException", "The requested operation is not recognized by the service.", "")
	}
}

// authenticate accepts a bearer Bedrock API key (when configured) or a
// right SigV4 signature.
func (s *Server) authenticate(r *http.Request, body []byte) *authError {
	auth := r.Header.Get("Authorization")
	if key, ok := strings.CutPrefix(auth, "Bearer "); ok {
		if s.o.APIKey != "" && key == s.o.APIKey {
			return nil
		}
		return &authError{"UnrecognizedClientException", "Invalid API Key format: Must start with pre-defined prefix"}
	}
	if auth == "" {
		return &authError{"MissingAuthenticationTokenException", "Missing Authentication Token"}
	}
	return s.verifySigV4(r, body)
}

// reply is the caller's Reply for c.
func (s *Server) reply(c Call) Reply {
	if s.o.Reply == nil {
		return Reply{}
	}
	return s.o.Reply(c)
}

// writeError answers with Bedrock's error: status, x-amzn-ErrorType and
// {"message":...}.
func writeError(w http.ResponseWriter, status int, name, message, retryAfter string) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-Errortype", name+":http://internal.amazon.com/coral/com.amazon.bedrock/")
	h.Set("X-Amzn-Requestid", requestID())
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	w.WriteHeader(status)
	var b bytes.Buffer
	b.WriteString(`{"message":`)
	b.Write(jsonString(message))
	b.WriteString("}")
	_, _ = w.Write(b.Bytes())
}
