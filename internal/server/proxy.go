package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/usage"
)

// handleProxy forwards any other /v1 request: no cache. Authentication
// (and, when configured, requests/min) apply, the model allow-list holds,
// and stored objects stay their owner's: a request naming an object this
// tenant does not own is refused before it is forwarded, creates are
// recorded, and lists are filtered.
func (s *Server) handleProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodTrace || r.Method == http.MethodConnect {
		// A TRACE answer echoes the request as the upstream got it,
		// Corral's upstream key included.
		writeError(w, errMethodNotAllowed)
		return
	}
	rel, aerr := checkPath(r)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	api := apiOfRequest(r)
	if api == apiAnthropic && !anthropicServes(rel) {
		writeError(w, errNoAnthropicEndpoint)
		return
	}
	if compressed(r) {
		writeError(w, errCompressedBody) // its fields could not be checked
		return
	}
	t, _ := tenant.FromContext(r.Context())
	// A model named in the path (GET /v1/models/{model}) is held to the
	// allow-list like a body's: one the tenant may not use is not found,
	// as it is absent from the tenant's list.
	pathModel := modelOfPath(rel)
	if pathModel != "" && !t.Allows(pathModel) {
		writeError(w, errModelNotFound(pathModel))
		return
	}
	if aerr := s.checkUnmetered(w, r, t, rel); aerr != nil {
		writeError(w, aerr)
		return
	}
	acc := objects.RouteFor(api, r.Method, rel)
	req := upstream.Request{
		Method:   r.Method,
		Path:     rel,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header,
	}
	var found objects.Body
	model := pathModel // what routing reads: the path's or a JSON body's model, else any upstream of the API
	if streamsUpload(r, rel) {
		// File bytes are relayed as they arrive; the query string is
		// still checked.
		req.Stream, req.ContentLength = r.Body, r.ContentLength
		ids, aerr := queryRefs(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		found.IDs = ids
	} else {
		body, aerr := readBody(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		// The model allow-list holds on every path, not only the cached ones.
		checked, aerr := checkProxiedModel(t, r, body)
		if checked != "" {
			recordFrom(r.Context()).model = checked
		}
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		if found, aerr = objectRefs(r, rel, body); aerr != nil {
			writeError(w, aerr)
			return
		}
		if aerr := checkNamedModels(t, found); aerr != nil {
			writeError(w, aerr)
			return
		}
		// Routing reads the body's model (the outer model: a proxied call
		// goes only to an upstream that serves it); the allow-list check
		// has already read it for a tenant with one.
		if checked != "" {
			model = checked
		} else if model == "" {
			model = bodyModel(body)
		}
		if len(body) > 0 || r.Method == http.MethodPost || r.Method == http.MethodPut || r.Method == http.MethodPatch {
			req.Body = body
		}
	}
	creates := createsObject(acc, rel, found)
	pin, aerr := s.guardObjects(r.Context(), t, acc, found, creates)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	rt := route{pin: pin, api: api, model: model}
	if acc.Op == objects.List && pin == "" {
		rt.pin = s.up.Primary(api, rel) // every page of a list from one upstream
		if rt.pin == "" {
			writeError(w, errNotServed)
			return
		}
	}
	if acc.Op == objects.Create && (acc.Kind == "batch" || acc.Kind == "message_batch") {
		if !s.admitBatch(w, r, t, rt, acc, req.Body) {
			return
		}
	}
	switch {
	case acc.Op == objects.List:
		s.forwardList(w, r, t, rt, req, acc.Kind)
	case acc.Op != objects.None || creates:
		s.forwardObjects(w, r, t, rt, req, acc, creates, relayOptions{})
	default:
		s.forward(w, r, rt, req)
	}
}

// bodyModel is the top-level "model" of a JSON body, for routing ("" when
// there is none).
func bodyModel(body []byte) string {
	b := bytes.TrimLeft(body, " \t\r\n")
	if len(b) == 0 || b[0] != '{' || !bytes.Contains(b, []byte(`"model"`)) {
		return ""
	}
	var v struct {
		Model string `json:"model"`
	}
	_ = json.Unmarshal(b, &v)
	return v.Model
}

// compressed reports a body sent with a Content-Encoding other than
// identity, in any of the request's Content-Encoding headers.
func compressed(r *http.Request) bool {
	for _, v := range r.Header["Content-Encoding"] {
		for enc := range strings.SplitSeq(v, ",") {
			if enc = strings.TrimSpace(enc); enc != "" && !strings.EqualFold(enc, "identity") {
				return true
			}
		}
	}
	return false
}

// modelOfPath is the model a path below /v1 names (/models/{model}), ""
// for any other path.
func modelOfPath(rel string) string {
	if len(rel) <= len("/models/") || !strings.EqualFold(rel[:len("/models/")], "/models/") {
		return ""
	}
	return strings.TrimSuffix(rel[len("/models/"):], "/")
}

func errModelNotFound(model string) *apiError {
	return clientError(http.StatusNotFound, "model_not_found", "The model "+strconv.Quote(model)+" does not exist or you do not have access to it.").withParam("model")
}

var (
	errPathParams = errInvalidRequest("The path must not contain ';': no API Corral serves has path parameters, and upstreams read them differently.", "")
	errBadPath    = errInvalidRequest("The path must not contain '..', '//', backslashes, or percent-escapes of anything but letters, digits and the punctuation SDKs escape in ids (such as ':' and '@'): an encoded slash, dot, percent sign or control character reads differently to different servers.", "")
)

// proxyPath returns the request's path below /v1, or false when checkPath
// refuses it.
func proxyPath(r *http.Request) (string, bool) {
	rel, aerr := checkPath(r)
	return rel, aerr == nil
}

// checkPath returns the request's path below /v1 as the upstream will see
// it (decoded: the upstream client escapes it again), refusing any path
// that does not decode to one meaning for every server on the way: dot
// segments, empty segments, backslashes, path parameters (';': "..;x" is
// ".." and "files;x" is "files" to servers that strip them), and escapes
// of anything but the characters an SDK escapes in an id (an encoded
// slash, dot, percent sign or control character).
func checkPath(r *http.Request) (string, *apiError) {
	if strings.Contains(r.URL.Path, ";") {
		return "", errPathParams
	}
	raw := r.URL.EscapedPath()
	if !plainEscapes(raw) || strings.Contains(raw, "//") || strings.Contains(raw, "\\") {
		return "", errBadPath
	}
	for seg := range strings.SplitSeq(r.URL.Path, "/") {
		if seg == "." || seg == ".." {
			return "", errBadPath
		}
	}
	if path.Clean(r.URL.Path) != strings.TrimSuffix(r.URL.Path, "/") || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return "", errBadPath
	}
	return strings.TrimPrefix(r.URL.Path, "/v1"), nil
}

// plainEscapes reports whether every percent-escape in the escaped path
// raw is well formed and spells a character that means the same encoded or
// not: a letter, a digit, or one of - _ ~ ! $ & ' ( ) * + , = : @ (what
// encodeURIComponent and url.PathEscape escape in an id or a model name,
// such as the colons of "ft:gpt-4o-mini:org::id"). Such a path routes as
// its decoded form.
func plainEscapes(raw string) bool {
	for i := 0; i < len(raw); i++ {
		if raw[i] != '%' {
			continue
		}
		if i+2 >= len(raw) || unhex(raw[i+1]) < 0 || unhex(raw[i+2]) < 0 {
			return false
		}
		c := byte(unhex(raw[i+1])<<4 | unhex(raw[i+2]))
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case strings.IndexByte("-_~!$&'()*+,=:@", c) >= 0:
		default:
			return false
		}
		i += 2
	}
	return true
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// forward calls the upstream with the client's context (a client that
// hangs up cancels the call) and relays the answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request) {
	s.forwardWith(w, r, rt, req, relayOptions{})
}

// forwardWith is forward with the relay set for an API (its stream's end
// and error event).
func (s *Server) forwardWith(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request, o relayOptions) {
	resp, finish := s.forwardCall(w, r, rt, req, o.original)
	if resp == nil {
		return
	}
	defer finish()
	s.relayWith(w, r, resp, o)
}

// forwardCall makes a forwarded request's upstream call. A failed call is
// answered and counted here, and resp is nil; otherwise finish closes the
// body and counts the call once the answer has been relayed. original,
// when set, is the client's own body that req's was prepared from: an
// upstream known to refuse the prepared body is sent original, and one
// that refuses it now is sent original at once, as a flight's call does
// (caller.Call).
func (s *Server) forwardCall(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request, original []byte) (resp *http.Response, finish func()) {
	rec := recordFrom(r.Context())
	start := time.Now()
	resp, err := s.sendPrepared(r.Context(), rt, req, original)
	if err != nil {
		rec.upstreamMS = msSince(start)
		rec.err = err.Error()
		aerr := statusError(err)
		if aerr == errNoUpstreamForModel || aerr == errNoUpstreamAvailable {
			// Corral's refusal, not an answer: no cache status, no
			// upstream call counted.
			rec.cache = ""
			w.Header().Del("X-Corral-Cache")
			w.Header().Del("Cache-Status")
			writeError(w, aerr)
			return nil, nil
		}
		s.countForwarded(rec, outcomeOf(aerr), start)
		writeError(w, aerr)
		return nil, nil
	}
	return resp, func() {
		resp.Body.Close()
		rec.upstreamMS = msSince(start)
		s.countForwarded(rec, negcache.Classify(resp.StatusCode).String(), start)
	}
}

// countForwarded counts a bypass or proxied request's upstream call.
func (s *Server) countForwarded(rec *logRecord, outcome string, start time.Time) {
	if rec.tenant == "" {
		return
	}
	s.metrics.Upstream(rec.tenant, rec.model, outcome, time.Since(start))
	s.usage.Add(rec.scope, usage.Counters{UpstreamCalls: 1, ByModel: map[string]usage.ModelCounters{rec.row(): {UpstreamCalls: 1}}})
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
