package server

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/corralhq/corral/internal/cache"
	"github.com/corralhq/corral/internal/coalesce"
	"github.com/corralhq/corral/internal/keying"
	"github.com/corralhq/corral/internal/objects"
	"github.com/corralhq/corral/internal/ratelimit"
	"github.com/corralhq/corral/internal/tenant"
	"github.com/corralhq/corral/internal/upstream"
)

// handleModelCall serves the model endpoints (chat completions,
// completions, embeddings): validate, check the allow-list, then look up,
// coalesce and call upstream.
func (s *Server) handleModelCall(endpoint string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		t, _ := tenant.FromContext(r.Context())
		rec := recordFrom(r.Context())
		body, aerr := readBody(r)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		ctl, aerr := parseControls(r.Header)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		req, err := keying.Parse(t.ID, endpoint, body)
		if err != nil {
			writeError(w, errBadBody(err))
			return
		}
		if req.Model == "" {
			writeError(w, errInvalidRequest("You must provide a model parameter.", "model"))
			return
		}
		rec.model, rec.endpoint = req.Model, endpoint
		if !t.Allows(req.Model) {
			writeError(w, errModelNotAllowed(req.Model))
			return
		}
		// Stored objects: a prompt may name files (file parts) and a chat
		// completion with store: true creates one. Both are checked before
		// anything is served or forwarded; answers with store: true are
		// recorded for this tenant whichever way they are served.
		found, aerr := objectRefs(r, body)
		if aerr != nil {
			writeError(w, aerr)
			return
		}
		creates := createsObject(objects.Access{}, endpoint, found)
		if _, aerr := s.guardObjects(r.Context(), t, objects.Access{}, found, creates); aerr != nil {
			writeError(w, aerr)
			return
		}
		var stored *recorder // records this tenant's stored completion, when it asked for one
		if creates {
			stored = s.newRecorder(r.Context(), t, true, "chat_completion")
		}

		estimate := tokenEstimate(endpoint, req.PromptBytes, req.MaxTokens, req.N)
		if !t.Cache || ctl.noStore {
			if t.TokensPerMinute > 0 {
				res, aerr := s.takeTokens(r.Context(), t, ratelimit.Tokens, t.TokensPerMinute, estimate)
				ratelimit.SetHeaders(w.Header(), ratelimit.Tokens.Suffix(), res)
				if aerr != nil {
					writeError(w, aerr) // a refusal, not an answer: no cache status
					return
				}
			}
			rec.cache = cacheBypass
			setCacheHeaders(w.Header(), cacheBypass, nil, false, ctl, s.now())
			breq := upstream.Request{Method: http.MethodPost, Path: endpoint, Header: r.Header, Body: body}
			if creates {
				s.forwardObjects(w, r, t, breq, objects.Access{}, true)
				return
			}
			s.forward(w, r, breq)
			return
		}

		name := keying.Name(t.ID, req.Hash, keying.Response)
		negName := keying.Name(t.ID, req.Hash, keying.Negative)
		// A streaming request in distributed mode skips the separate lookup:
		// its flight's lock call reads the entries in the same round trip,
		// so a streaming miss pays one Redis round trip before its upstream
		// call instead of two (time to first byte is what streams are for).
		_, oneTrip := s.locker.(ReadingLocker)
		minStored := ctl.minStoredAt(s.now())
		skipLookup := req.Stream && oneTrip && minStored.IsZero()
		if !ctl.noCache && !skipLookup {
			if e, neg, _ := s.lookup(r.Context(), name, negName, minStored); e != nil {
				rec.cache = cacheHit
				if neg {
					rec.cache = cacheNegative
				}
				if !neg {
					rec.saved = e.PromptTokens + e.CompletionTokens
					stored.entry(e)
				}
				s.tokenHeaders(r.Context(), t, w.Header())
				s.serveEntry(w, r, endpoint, e, rec.cache, false, &req, ctl)
				return
			}
		}
		s.serveFlight(w, r, t, endpoint, body, &req, ctl, name, negName, estimate, stored)
	}
}

// serveFlight joins (or starts) the flight for this prompt and answers
// from it: live from its stream record, or from its final result.
func (s *Server) serveFlight(w http.ResponseWriter, r *http.Request, t *tenant.Tenant, endpoint string, body []byte, req *keying.Request, ctl controls, name, negName string, estimate int, stored *recorder) {
	rec := recordFrom(r.Context())
	f, leader := s.groupFor(t.ID).Join(req.Hash, func() (*flightState, coalesce.Work) {
		st := &flightState{rec: coalesce.NewRecord(), streaming: make(chan struct{})}
		ttl := t.CacheTTL
		if ctl.ttl > 0 {
			ttl = ctl.ttl
		}
		p := &flightParams{
			t:           t,
			endpoint:    endpoint,
			name:        name,
			negName:     negName,
			lockName:    keying.Name(t.ID, req.Hash, keying.Lock),
			streamName:  keying.Name(t.ID, req.Hash, keying.Stream),
			body:        body,
			header:      r.Header.Clone(),
			ttl:         ttl,
			negTTL:      t.NegativeTTL,
			minStoredAt: ctl.minStoredAt(s.now()),
			noCache:     ctl.noCache,
			estimate:    estimate,
			model:       req.Model,
		}
		if req.Stream && !s.noSplice.Load() {
			p.body, p.original = withStreamUsage(body), body
			p.spliced = len(p.body) != len(body)
		}
		s.flights.Add(1) // under the group's lock, before the work starts
		return st, func(ctx context.Context) error {
			defer s.flights.Done()
			return s.runFlight(ctx, p, st)
		}
	})
	defer f.Leave()
	joined := time.Now()
	st := f.Value()
	source := cacheCoalesced
	if leader {
		source = cacheMiss
	}
	// account notes what this request cost or saved once its answer is known.
	account := func(e *cache.Entry) {
		if e == nil || e.Status != http.StatusOK {
			return
		}
		stored.entry(e)
		if source == cacheMiss {
			rec.prompt, rec.completion = e.PromptTokens, e.CompletionTokens
			if isClosed(f.Done()) { // res.upstream is set when the flight ends
				rec.upstreamMS = float64(st.res.upstream.Microseconds()) / 1000
			}
		} else {
			rec.saved = e.PromptTokens + e.CompletionTokens
		}
		if source == cacheCoalesced {
			s.metrics.Coalesced(t.ID, time.Since(joined))
		}
	}

	select {
	case <-st.streaming:
	case <-f.Done():
	case <-r.Context().Done():
		writeError(w, errClientClosed)
		return
	}
	// The leader reports the tokens/min decision its flight made; everyone
	// else sees the bucket as it is (they cost nothing).
	if leader && st.tokens != nil {
		ratelimit.SetHeaders(w.Header(), ratelimit.Tokens.Suffix(), *st.tokens)
	} else {
		s.tokenHeaders(r.Context(), t, w.Header())
	}
	// A streamed answer is followed from its record even when the flight
	// has already ended: the record holds the whole stream as it came.
	if req.Stream && isClosed(st.streaming) {
		if st.mirrored {
			source = cacheCoalesced // another instance leads this stream
		}
		rec.cache = source
		if s.followStream(w, r, st, source, req.IncludeUsage, ctl) {
			account(st.res.entry) // the record ended cleanly, after the entry was set
		}
		return
	}
	select {
	case <-f.Done():
	case <-r.Context().Done():
		writeError(w, errClientClosed)
		return
	}

	res := st.res
	if (leader || res.source == cacheHit || res.source == cacheNegative) && res.source != "" {
		// Followers of a flight that found a stored answer were served
		// from the cache too.
		source = res.source
	}
	rec.cache = source
	account(res.entry)
	switch {
	case res.fail != nil && res.fail.Status == http.StatusTooManyRequests:
		// Corral's own refusal (tokens/min, tenant_concurrency_exceeded;
		// an upstream 429 is an entry) is no answer: it carries no
		// X-Corral-Cache and is not counted as a cache outcome.
		rec.cache = ""
		writeError(w, res.fail)
	case res.fail != nil:
		setCacheHeaders(w.Header(), source, nil, false, ctl, s.now())
		writeError(w, res.fail)
	case res.entry == nil:
		// The work ended without an answer: cancelled or panicked.
		var pe *coalesce.PanicError
		if errors.As(f.Err(), &pe) {
			s.log.Error("flight panicked", "panic", pe.Value, "stack", string(pe.Stack))
			writeError(w, errInternal)
			return
		}
		writeError(w, errUpstream)
	default:
		s.serveEntry(w, r, endpoint, res.entry, source, res.stored && leader, req, ctl)
	}
}

// withStreamUsage asks the upstream for the usage chunk when a streaming
// leader did not mention stream_options: the stored entry then carries
// usage (so non-streaming hits have it, and tokens/min sees real numbers),
// and any follower that asks for usage can have it. The chunk is filtered
// out for clients that did not ask. This splice is the only change Corral
// ever makes to a body; a body that mentions stream_options anywhere is
// forwarded as it is.
func withStreamUsage(body []byte) []byte {
	if bytes.Contains(body, []byte(`"stream_options"`)) {
		return body
	}
	end := bytes.LastIndexByte(body, '}')
	if end < 0 {
		return body
	}
	before := bytes.TrimRight(body[:end], " \t\r\n")
	out := make([]byte, 0, len(body)+48)
	out = append(out, before...)
	if len(before) > 0 && before[len(before)-1] != '{' {
		out = append(out, ',')
	}
	out = append(out, `"stream_options":{"include_usage":true}`...)
	return append(out, body[end:]...)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
