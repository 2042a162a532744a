package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
)

// defaultUpstream names the one upstream Corral has until several are
// configured; ownership records carry it so follow-ups can be routed.
const defaultUpstream = "default"

// maxObjectAnswer bounds an upstream answer Corral reads whole to find the
// objects it created or to filter a list; a larger answer is relayed
// unread (a create's answer is a few hundred bytes).
const maxObjectAnswer = 32 << 20

// maxListPages bounds the upstream pages one filtered list request reads
// while it fills the caller's page with the caller's own objects; after the
// first, pages are read listPageSize at a time, so one request scans up to
// about 5,000 objects of other tenants before it answers a short page.
const maxListPages = 50

// listPageSize is the limit of the upstream pages a filtered list reads
// after the first (100 is the largest every OpenAI list accepts).
const listPageSize = 100

func errNoSuchObject(id string) *apiError {
	return &apiError{Status: http.StatusNotFound, Type: typeInvalidRequest, Code: "not_found",
		Message: "No such object: " + id}
}

var (
	errStoredObjectsDisabled = &apiError{Status: http.StatusForbidden, Type: typeInvalidRequest, Code: "stored_objects_disabled",
		Message: "Stored objects (files, batches, stored responses, ...) are disabled for this API key."}
	errOwnershipUnavailable = &apiError{Status: http.StatusServiceUnavailable, Type: typeServer, Code: "ownership_unavailable",
		Message: "The gateway cannot check who owns this object right now; retry shortly."}
	errCompressedBody = &apiError{Status: http.StatusUnsupportedMediaType, Type: typeInvalidRequest, Code: "invalid_request_error",
		Message: "Compressed request bodies (Content-Encoding) are not accepted; send the body uncompressed."}
)

// objectRefs finds the object ids a buffered request names in its body and
// query string. A body that cannot be read for them is refused: an
// upstream with a more lenient parser could read an id Corral did not.
func objectRefs(r *http.Request, body []byte) (objects.Body, *apiError) {
	if len(body) > 0 && len(r.Header.Values("Content-Type")) > 1 {
		// Corral reads the first; an upstream may read the last.
		return objects.Body{}, errInvalidRequest("Send one Content-Type header.", "")
	}
	found, err := objects.Refs(r.Header.Get("Content-Type"), body)
	if errors.Is(err, objects.ErrTooMany) {
		return objects.Body{}, errTooManyIDs
	}
	if err != nil {
		return objects.Body{}, errInvalidRequest("The request body could not be read: send UTF-8 JSON, a form or multipart/form-data.", "")
	}
	ids, aerr := queryRefs(r)
	if aerr != nil {
		return objects.Body{}, aerr
	}
	found.IDs = append(found.IDs, ids...)
	if found.Query != "" {
		return objects.Body{}, errStoredQuery(found.Query)
	}
	return found, nil
}

// queryRefs returns the ids a query string names. A query Go cannot
// parse whole (a ';' separator, which some upstreams split on) is refused
// rather than checked in part. On a list, the cursors (after, before)
// must be the caller's own ids too: another tenant's id as a cursor would
// tell whether it exists and where it sits.
func queryRefs(r *http.Request) ([]string, *apiError) {
	if r.URL.RawQuery == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errInvalidRequest("The query string could not be read: separate parameters with '&' only.", "")
	}
	ids := objects.QueryRefs(q)
	if rel, ok := proxyPath(r); ok && objects.Route(r.Method, rel).Op == objects.List {
		for _, k := range []string{"after", "before"} {
			for _, v := range q[k] {
				if v != "" {
					ids = append(ids, v)
				}
			}
		}
	}
	return ids, nil
}

// errStoredQuery refuses a request that would have the upstream select
// stored objects by filter (an eval over stored completions or
// responses): in the shared account that reads every tenant's.
func errStoredQuery(typ string) *apiError {
	return &apiError{Status: http.StatusBadRequest, Type: typeInvalidRequest, Code: "unsupported_data_source",
		Message: "Data sources of type " + jsonQuote(typ) + " select stored objects across the shared upstream account and are not available through this gateway; name files by id instead."}
}

// guardObjects applies the tenant's stored-object policy to one request
// before anything is forwarded: deny refuses any access to stored objects;
// isolated lets through only objects this tenant owns, answering every
// other id with the same 404 whether it exists elsewhere or not at all.
// It returns the owner of the object named in the path, if any.
func (s *Server) guardObjects(ctx context.Context, t *tenant.Tenant, acc objects.Access, found objects.Body, creates bool) (*objects.Owner, *apiError) {
	ids := found.IDs
	if acc.Op == objects.Object {
		ids = append([]string{acc.ID}, ids...)
	}
	listsObjects := acc.Op == objects.List && acc.Kind != "model" // the model list is everyone's (fine-tuned ones are filtered out)
	if t.DenyObjects && (creates || listsObjects || acc.Op == objects.Object || len(ids) > 0) {
		return nil, errStoredObjectsDisabled
	}
	if len(ids) == 0 {
		return nil, nil
	}
	// Each distinct id is one store lookup (a pipelined Redis GET): one
	// body could name a million. Duplicates are looked up once, and no API
	// takes more than maxNamedIDs in one request.
	ids = distinct(ids)
	if len(ids) > maxNamedIDs {
		return nil, errTooManyIDs
	}
	owners, err := s.objects.Lookup(ctx, ids)
	for i, o := range owners {
		if o != nil && o.Tenant == t.ID {
			continue
		}
		if err != nil {
			recordFrom(ctx).err = err.Error()
			return nil, errOwnershipUnavailable
		}
		return nil, errNoSuchObject(ids[i])
	}
	if acc.Op == objects.Object {
		return owners[0], nil
	}
	return nil, nil
}

// maxNamedIDs bounds the distinct object ids one request may name.
const maxNamedIDs = objects.MaxRefs

var errTooManyIDs = errInvalidRequest("The request names more than "+strconv.Itoa(maxNamedIDs)+" object ids.", "")

// distinct returns ids without repeats, in first-seen order (the path's
// id stays first).
func distinct(ids []string) []string {
	if len(ids) < 2 {
		return ids
	}
	seen := make(map[string]bool, min(len(ids), maxNamedIDs+1))
	out := ids[:0:0]
	for _, id := range ids {
		if !seen[id] {
			seen[id] = true
			out = append(out, id)
			if len(out) > maxNamedIDs {
				break
			}
		}
	}
	return out
}

// createsObject reports whether a request makes a stored object: a
// collection's create, a Responses call unless it says store: false, and
// a chat completion with store: true.
func createsObject(acc objects.Access, rel string, found objects.Body) bool {
	switch {
	case rel == "/chat/completions" || (acc.Op == objects.Create && acc.Kind == "chat_completion"):
		return found.Store == objects.StoreTrue
	case acc.Op != objects.Create:
		return false
	case acc.Kind == "response":
		return found.Store != objects.StoreFalse
	}
	return true
}

// streamsUpload reports whether a request's body is relayed as it is read
// instead of buffered: multipart uploads of file bytes, whose fields name
// no stored objects (purpose, expires_after, data).
func streamsUpload(r *http.Request, rel string) bool {
	if r.Method != http.MethodPost || r.ContentLength == 0 {
		return false
	}
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "multipart/form-data" {
		return false
	}
	return rel == "/files" || (strings.HasPrefix(rel, "/uploads/") && strings.HasSuffix(strings.TrimSuffix(rel, "/"), "/parts"))
}

// recorder records the objects answers created for one tenant.
type recorder struct {
	s      *Server
	ctx    context.Context // detached: a client that hangs up does not lose a record
	tenant string
	create bool
	kind   string // the kind of object the path's answers are
	seen   map[string]bool
}

// newRecorder records for t what answers of kind (the path's) created.
func (s *Server) newRecorder(ctx context.Context, t *tenant.Tenant, create bool, kind string) *recorder {
	return &recorder{s: s, ctx: context.WithoutCancel(ctx), tenant: t.ID, create: create, kind: kind}
}

// entry records the stored completion a cached or coalesced answer names;
// a nil recorder (the request stored nothing) does nothing.
func (rc *recorder) entry(e *cache.Entry) {
	if rc != nil && e != nil && e.Status == http.StatusOK {
		rc.answer(e.Body)
	}
}

// answer records what a JSON answer created.
func (rc *recorder) answer(body []byte) {
	rc.add(objects.CreatedAs(body, rc.create, rc.kind))
}

func (rc *recorder) add(refs []objects.Ref) {
	out := refs[:0]
	for _, ref := range refs {
		if rc.seen[ref.ID] {
			continue
		}
		if rc.seen == nil {
			rc.seen = map[string]bool{}
		}
		rc.seen[ref.ID] = true
		out = append(out, ref)
	}
	if len(out) > 0 {
		rc.s.objects.Record(rc.ctx, rc.tenant, defaultUpstream, out)
	}
}

// event records what one streamed event created: a Responses stream names
// its response in response.created and its items in response.completed; a
// chat stream names its completion in every chunk.
func (rc *recorder) event(data []byte) {
	switch {
	case bytes.Contains(data, []byte(`"response.created"`)), bytes.Contains(data, []byte(`"response.completed"`)):
		var ev struct {
			Type     string          `json:"type"`
			Response json.RawMessage `json:"response"`
		}
		if json.Unmarshal(data, &ev) == nil && len(ev.Response) > 0 {
			rc.answer(ev.Response)
		}
	case bytes.Contains(data, []byte(`"chat.completion.chunk"`)) && rc.create && rc.kind == "chat_completion":
		var ch struct {
			ID     string `json:"id"`
			Object string `json:"object"`
		}
		if json.Unmarshal(data, &ch) == nil && ch.Object == "chat.completion.chunk" && ch.ID != "" {
			rc.add([]objects.Ref{{ID: ch.ID, Kind: "chat_completion"}})
		}
	}
}

// forwardObjects forwards a request on an object path and records what
// its answer created, removing the record when the object was deleted.
func (s *Server) forwardObjects(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, req upstream.Request, acc objects.Access, creates bool) {
	resp, finish := s.forwardCall(w, r, req)
	if resp == nil {
		return
	}
	defer finish()
	rec := recordFrom(r.Context())
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	kind := acc.Kind
	if kind == "" {
		kind = "chat_completion" // the model calls: only a stored chat completion is recorded
	}
	rc := s.newRecorder(r.Context(), t, creates, kind)
	if ok && acc.Delete {
		if err := s.objects.Remove(context.WithoutCancel(r.Context()), acc.ID); err != nil {
			rec.err = err.Error() // the object is gone upstream; a stale record only names nothing
		}
	}
	switch {
	case !ok:
		s.relay(w, r, resp)
	case isEventStream(resp.Header):
		s.relayWith(w, r, resp, relayOptions{onEvent: rc.event, endsAtEOF: acc.Kind == "response"})
	case isJSON(resp.Header):
		body, complete, err := readPrefix(resp.Body, maxObjectAnswer)
		if err != nil && !complete {
			rec.err = err.Error()
			writeError(w, upstreamFailure(err))
			return
		}
		if complete {
			rc.answer(body)
			upstream.CopyResponseHeader(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body)
			return
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		s.relay(w, r, resp)
	default:
		s.relay(w, r, resp)
	}
}

// forwardList answers a list of a collection with only the caller's
// objects. It reads upstream pages (following after=<last id>) until the
// caller's page is full, the upstream has no more, or maxListPages were
// read (the first with the caller's limit, the rest listPageSize at a
// time); first_id, last_id and has_more describe what is returned.
func (s *Server) forwardList(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, req upstream.Request, kind string) {
	rec := recordFrom(r.Context())
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	backwards := q.Has("before")
	var (
		first       *objects.Page
		header      http.Header
		items       []json.RawMessage
		ids         []string
		hasMore     bool
		pagesNeeded = maxListPages
	)
	for page := 0; page < pagesNeeded; page++ {
		start := time.Now()
		resp, err := s.up.Do(r.Context(), req)
		if err != nil {
			rec.err = err.Error()
			aerr := upstreamFailure(err)
			s.countForwarded(rec, outcomeOf(aerr), start)
			if first == nil {
				writeError(w, aerr)
				return
			}
			hasMore = true
			break
		}
		s.countForwarded(rec, negcache.Classify(resp.StatusCode).String(), start)
		if resp.StatusCode != http.StatusOK || !isJSON(resp.Header) {
			if first == nil {
				s.relay(w, r, resp)
				resp.Body.Close()
				return
			}
			resp.Body.Close()
			hasMore = true
			break
		}
		body, complete, err := readPrefix(resp.Body, maxObjectAnswer)
		resp.Body.Close()
		p, perr := objects.ParsePage(body)
		if err != nil || !complete || perr != nil {
			if first == nil {
				writeError(w, errUpstream)
				return
			}
			hasMore = true
			break
		}
		if first == nil {
			first, header = p, resp.Header
			if limit <= 0 {
				limit = len(p.Items) // the upstream's default page size
			}
		}
		owners, err := s.objects.Lookup(r.Context(), p.IDs)
		if err != nil {
			rec.err = err.Error()
			writeError(w, errOwnershipUnavailable)
			return
		}
		for i, o := range owners {
			// In the model list only fine-tuned models are anyone's own;
			// the upstream's base models are every tenant's.
			shared := kind == "model" && !objects.IsFineTuned(p.IDs[i])
			if shared || (o != nil && o.Tenant == t.ID) {
				items, ids = append(items, p.Items[i]), append(ids, p.IDs[i])
			}
		}
		hasMore = p.HasMore
		if len(items) >= limit || !p.HasMore || backwards || len(p.IDs) == 0 {
			break
		}
		q.Set("after", p.IDs[len(p.IDs)-1])
		q.Set("limit", strconv.Itoa(max(limit, listPageSize)))
		req.RawQuery = q.Encode()
		if page == pagesNeeded-1 {
			hasMore = true
		}
	}
	if limit > 0 && len(items) > limit {
		items, ids, hasMore = items[:limit], ids[:limit], true
	}
	upstream.CopyResponseHeader(w.Header(), header)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(first.Encode(items, ids, hasMore))
}

// readPrefix reads r up to max bytes; complete is false when r had more
// (the bytes read so far are returned either way).
func readPrefix(r io.Reader, max int64) (b []byte, complete bool, err error) {
	b, err = io.ReadAll(io.LimitReader(r, max+1))
	if int64(len(b)) > max {
		return b, false, nil
	}
	return b, err == nil, err
}

func isJSON(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}
