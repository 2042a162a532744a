package server

import (
	"context"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
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
	return clientError(http.StatusNotFound, "not_found", "No such object: "+id)
}

var (
	errStoredObjectsDisabled = clientError(http.StatusForbidden, "stored_objects_disabled", "Stored objects (files, batches, stored responses, ...) are disabled for this API key.")
	errOwnershipUnavailable  = serverError(http.StatusServiceUnavailable, "ownership_unavailable", "The gateway cannot check who owns this object right now; retry shortly.")
	errCompressedBody        = clientError(http.StatusUnsupportedMediaType, "invalid_request_error", "Compressed request bodies (Content-Encoding) are not accepted; send the body uncompressed.")
)

// objectRefs finds the object ids a buffered request names in its body and
// query string; rel is its path below /v1, whose schema says where the
// body names objects. A body that cannot be read for them is refused: an
// upstream with a more lenient parser could read an id Corral did not.
func objectRefs(r *http.Request, rel string, body []byte) (objects.Body, *apiError) {
	if len(body) > 0 && len(r.Header["Content-Type"]) > 1 {
		// Corral reads the first; an upstream may read the last.
		return objects.Body{}, errInvalidRequest("Send one Content-Type header.", "")
	}
	found, err := objects.Refs(rel, header(r.Header, "Content-Type"), body)
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
// rather than checked in part. On a list, the cursors (OpenAI's after and
// before, Anthropic's after_id and before_id) must be the caller's own ids
// too: another tenant's id as a cursor would tell whether it exists and
// where it sits. The model list is everyone's, so there only a fine-tuned
// model as a cursor is checked.
func queryRefs(r *http.Request) ([]string, *apiError) {
	if r.URL.RawQuery == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errInvalidRequest("The query string could not be read: separate parameters with '&' only.", "")
	}
	ids := objects.QueryRefs(q)
	rel, ok := proxyPath(r)
	if !ok {
		return ids, nil
	}
	if acc := objects.Route(r.Method, rel); acc.Op == objects.List {
		for _, k := range listCursors {
			for _, v := range q[k] {
				if v != "" && (acc.Kind != "model" || objects.IsFineTuned(v)) {
					ids = append(ids, v)
				}
			}
		}
	}
	return ids, nil
}

// listCursors are the query parameters with which lists page from an
// object: OpenAI's and Anthropic's.
var listCursors = []string{"after", "before", "after_id", "before_id"}

// errStoredQuery refuses a request that would have the upstream select
// stored objects by filter (an eval over stored completions or
// responses): in the shared account that reads every tenant's.
func errStoredQuery(typ string) *apiError {
	return clientError(http.StatusBadRequest, "unsupported_data_source",
		"Data sources of type "+jsonQuote(typ)+" select stored objects across the shared upstream account and are not available through this gateway; name files by id instead.")
}

// guardObjects applies the tenant's stored-object policy to one request
// before anything is forwarded: deny refuses any access to stored objects;
// isolated lets through only objects this tenant owns, answering every
// other id with the same 404 whether it exists elsewhere or not at all.
// It returns the upstream that holds the objects named ("" for none),
// where the request must go: no other upstream has them.
func (s *Server) guardObjects(ctx context.Context, t *tenant.Tenant, acc objects.Access, found objects.Body, creates bool) (string, *apiError) {
	ids := found.IDs
	if acc.Op == objects.Object {
		ids = append([]string{acc.ID}, ids...)
	}
	listsObjects := acc.Op == objects.List && acc.Kind != "model" // the model list is everyone's (fine-tuned ones are filtered out)
	if t.DenyObjects && (creates || listsObjects || acc.Op == objects.Object || len(ids) > 0) {
		return "", errStoredObjectsDisabled
	}
	if len(ids) == 0 {
		return "", nil
	}
	// Each distinct id is one store lookup (a pipelined Redis GET): one
	// body could name a million. Duplicates are looked up once, and no API
	// takes more than maxNamedIDs in one request.
	ids = distinct(ids)
	if len(ids) > maxNamedIDs {
		return "", errTooManyIDs
	}
	owners, err := s.objects.Lookup(ctx, ids)
	for i, o := range owners {
		// An object of the other API is not found either: an OpenAI file
		// id never names an Anthropic file, nor the other way round.
		if o != nil && o.Tenant == t.Scope && objects.IsAPI(acc.API, o.API()) {
			continue
		}
		if err != nil {
			recordFrom(ctx).err = err.Error()
			return "", errOwnershipUnavailable
		}
		return "", errNoSuchObject(ids[i])
	}
	pin := owners[0].Upstream
	for _, o := range owners[1:] {
		if o.Upstream != pin {
			return "", errObjectsApart
		}
	}
	return pin, nil
}

var errObjectsApart = errInvalidRequest("The request names objects held by different upstreams; one request can reach only one.", "")

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
	case rel == "/responses":
		return found.Store != objects.StoreFalse // the Responses API stores by default
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
