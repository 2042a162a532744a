package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/failover"
	"github.com/corralhq/corral/internal/negcache"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
	"github.com/corralhq/corral/internal/wire"
	"github.com/corralhq/corral/internal/wire/responses"
)

// recorder records the objects answers created for one tenant.
type recorder struct {
	s      *Server
	ctx    context.Context // detached: a client that hangs up does not lose a record
	tenant string
	create bool
	kind   string // the kind of object the path's answers are
	// entryName is the cache entry a model call's answer is stored under,
	// kept with the record so deleting the object purges the entry.
	entryName string
	// upstream holds what is recorded: the X-Corral-Upstream of the
	// answer ("" when unknown: follow-ups are then routed by model).
	upstream string
	seen     map[string]bool
}

// newRecorder records for t what answers of kind (the path's) created.
func (s *Server) newRecorder(ctx context.Context, t *tenant.Tenant, create bool, kind string) *recorder {
	return &recorder{s: s, ctx: context.WithoutCancel(ctx), tenant: t.Scope, create: create, kind: kind}
}

// entry records the stored completion a cached or coalesced answer names;
// a nil recorder (the request stored nothing) does nothing.
func (rc *recorder) entry(e *entry.Entry) {
	if rc != nil && e != nil && e.Status == http.StatusOK {
		if v := e.Header[failover.UpstreamHeader]; len(v) > 0 {
			rc.upstream = v[0]
		}
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
		rc.s.objects.RecordEntry(rc.ctx, rc.tenant, rc.upstream, rc.entryName, out)
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
// o is how a model call's answer is relayed (its usage read, its stream's
// hidden events, its original body); zero for other object paths.
func (s *Server) forwardObjects(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, rt route, req upstream.Request, acc objects.Access, creates bool, o relayOptions) {
	resp, finish := s.forwardCall(w, r, rt, req, o.original)
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
	rc.upstream = resp.Header.Get(failover.UpstreamHeader)
	if ok && acc.Delete {
		s.removeObject(r.Context(), acc.ID)
	}
	switch {
	case !ok:
		s.relay(w, r, resp)
	case isEventStream(resp.Header):
		o.onEvent = rc.event
		if acc.Kind == "response" {
			// A Responses stream ends with its end event; one whose body
			// ends first was cut and gets the API's error event.
			o.format = responses.Format{}
		}
		s.relayWith(w, r, resp, o)
	case isJSON(resp.Header):
		body, complete, err := readPrefix(resp.Body, maxObjectAnswer)
		if err != nil && !complete {
			rec.err = err.Error()
			writeError(w, statusError(err))
			return
		}
		if complete {
			if o.answered != nil && resp.StatusCode == http.StatusOK {
				o.answered()
			}
			rc.answer(body)
			upstream.CopyResponseHeader(w.Header(), resp.Header)
			w.WriteHeader(resp.StatusCode)
			_, _ = w.Write(body)
			if o.usage != nil && resp.StatusCode == http.StatusOK {
				if ok, u := wire.AnswerUsage(o.format, o.endpoint, body); ok {
					o.usage(u)
				}
			}
			return
		}
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
		s.relayWith(w, r, resp, o)
	default:
		s.relay(w, r, resp)
	}
}

// removeObject drops the record of an object deleted through Corral and
// the cache entry that carries its id (a stored response served from the
// cache must not outlive its deletion).
func (s *Server) removeObject(ctx context.Context, id string) {
	ctx = context.WithoutCancel(ctx)
	rec := recordFrom(ctx)
	owners, err := s.objects.Lookup(ctx, []string{id})
	if err == nil && owners[0] != nil && owners[0].Entry != "" {
		if err := s.cache.Delete(ctx, owners[0].Entry); err != nil {
			rec.err = err.Error() // the entry expires with its TTL
		}
	}
	if err := s.objects.Remove(ctx, id); err != nil {
		rec.err = err.Error() // the object is gone upstream; a stale record only names nothing
	}
}

// forwardList answers a list of a collection with only the caller's
// objects. It reads upstream pages (following after=<last id>) until the
// caller's page is full, the upstream has no more, or maxListPages were
// read (the first with the caller's limit, the rest listPageSize at a
// time); first_id, last_id and has_more describe what is returned.
func (s *Server) forwardList(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, rt route, req upstream.Request, kind string) {
	rec := recordFrom(r.Context())
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	// Anthropic's lists page with after_id and before_id, OpenAI's with
	// after and before.
	afterParam, beforeParam := "after", "before"
	if rt.api == apiAnthropic {
		afterParam, beforeParam = "after_id", "before_id"
	}
	backwards := q.Has(beforeParam)
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
		resp, err := s.sendRoute(r.Context(), rt, req)
		if err != nil {
			rec.err = err.Error()
			aerr := statusError(err)
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
			if shared || (o != nil && o.Tenant == t.Scope && objects.IsAPI(rt.api, o.API())) {
				items, ids = append(items, p.Items[i]), append(ids, p.IDs[i])
			}
		}
		hasMore = p.HasMore
		if len(items) >= limit || !p.HasMore || backwards || len(p.IDs) == 0 {
			break
		}
		q.Set(afterParam, p.IDs[len(p.IDs)-1])
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
