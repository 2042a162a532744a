package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"path"
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
	rel, ok := proxyPath(r)
	if !ok {
		writeError(w, errInvalidRequest("The path must not contain '..', '//' or encoded slashes and dots.", ""))
		return
	}
	if compressed(r) {
		writeError(w, errCompressedBody) // its fields could not be checked
		return
	}
	t, _ := tenant.FromContext(r.Context())
	if aerr := s.checkUnmetered(w, r, t, rel); aerr != nil {
		writeError(w, aerr)
		return
	}
	acc := objects.Route(r.Method, rel)
	req := upstream.Request{
		Method:   r.Method,
		Path:     rel,
		RawQuery: r.URL.RawQuery,
		Header:   r.Header,
	}
	var found objects.Body
	model := "" // what routing reads: a JSON body's model, else any upstream of the API
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
		if found, aerr = objectRefs(r, body); aerr != nil {
			writeError(w, aerr)
			return
		}
		// Routing reads the body's model (the outer model: a proxied call
		// goes only to an upstream that serves it); the allow-list check
		// has already read it for a tenant with one.
		if model = checked; model == "" {
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
	rt := route{pin: pin, model: model}
	if acc.Op == objects.List && pin == "" {
		rt.pin = s.up.Primary(apiOf(rel)) // every page of a list from one upstream
	}
	if acc.Op == objects.Create && acc.Kind == "batch" {
		if aerr := s.checkBatchInput(r.Context(), t, rt, req.Body); aerr != nil {
			writeError(w, aerr)
			return
		}
	}
	switch {
	case acc.Op == objects.List:
		s.forwardList(w, r, t, rt, req, acc.Kind)
	case acc.Op != objects.None || creates:
		s.forwardObjects(w, r, t, rt, req, acc, creates)
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

// proxyPath returns the request's path below /v1, refusing any path that
// could step outside the upstream's base path once a proxy in front of the
// upstream normalises it: dot segments, empty segments and their
// percent-encoded forms.
func proxyPath(r *http.Request) (string, bool) {
	raw := r.URL.EscapedPath()
	low := strings.ToLower(raw)
	if strings.Contains(raw, "//") || strings.Contains(low, "%2e") || strings.Contains(low, "%2f") || strings.Contains(low, "%5c") ||
		strings.Contains(raw, "\\") {
		return "", false
	}
	for seg := range strings.SplitSeq(r.URL.Path, "/") {
		// "..;x" is ".." to servers that strip path parameters (Tomcat,
		// Spring, some proxies).
		if seg, _, _ = strings.Cut(seg, ";"); seg == "." || seg == ".." {
			return "", false
		}
	}
	if path.Clean(r.URL.Path) != strings.TrimSuffix(r.URL.Path, "/") || !strings.HasPrefix(r.URL.Path, "/v1/") {
		return "", false
	}
	return strings.TrimPrefix(r.URL.Path, "/v1"), true
}

// forward calls the upstream with the client's context (a client that
// hangs up cancels the call) and relays the answer.
func (s *Server) forward(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request) {
	s.forwardWith(w, r, rt, req, relayOptions{})
}

// forwardWith is forward with the relay set for an API (its stream's end
// and error event).
func (s *Server) forwardWith(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request, o relayOptions) {
	resp, finish := s.forwardCall(w, r, rt, req)
	if resp == nil {
		return
	}
	defer finish()
	s.relayWith(w, r, resp, o)
}

// forwardCall makes a forwarded request's upstream call. A failed call is
// answered and counted here, and resp is nil; otherwise finish closes the
// body and counts the call once the answer has been relayed.
func (s *Server) forwardCall(w http.ResponseWriter, r *http.Request, rt route, req upstream.Request) (resp *http.Response, finish func()) {
	rec := recordFrom(r.Context())
	start := time.Now()
	resp, err := s.send(r.Context(), rt.pin, rt.model, req)
	if err != nil {
		rec.upstreamMS = msSince(start)
		rec.err = err.Error()
		aerr := statusError(err)
		if aerr == errNoUpstreamForModel {
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
	s.usage.Add(rec.tenant, usage.Counters{UpstreamCalls: 1})
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }
