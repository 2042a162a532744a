package negcache

import (
	"encoding/json"
	"time"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/keying"
)

// Key is the name of a prompt's negative entry, beside its positive one
// (keying.Response) in the same hash-tagged slot.
func Key(tenant, hash string) string { return keying.Name(tenant, hash, keying.Negative) }

// Pick chooses what to serve from a prompt's positive and negative
// entries, read together: the positive entry wins; negative reports that
// e is a remembered failure. Entries stored before minStoredAt are
// ignored. Both nil (or both too old) is a miss.
func Pick(pos, neg *entry.Entry, minStoredAt time.Time) (e *entry.Entry, negative bool) {
	switch {
	case pos != nil && !pos.StoredAt.Before(minStoredAt):
		return pos, false
	case neg != nil && !neg.StoredAt.Before(minStoredAt):
		return neg, true
	}
	return nil, false
}

// Decision is what to do with a whole upstream answer.
type Decision uint8

const (
	// Pass: answer the client, store nothing.
	Pass Decision = iota
	// StorePositive: store it as the prompt's answer.
	StorePositive
	// StoreNegative: remember it as the prompt's known failure.
	StoreNegative
)

// Decide classifies a whole answer for storing. A body that is not JSON
// (an HTML error page, a stream sent as the wrong type) is not an API
// answer and is never stored. changed reports that Corral sent a body it
// had changed (OpenAI's stream_options splice): an invalid-request failure
// to it might be the change's fault, so it is never remembered under the
// key the unchanged request shares.
func Decide(status int, body []byte, changed bool) Decision {
	if !json.Valid(body) {
		return Pass
	}
	switch ClassifyResponse(status, body) {
	case Answer:
		return StorePositive
	case Deterministic:
		if changed && status == 400 {
			return Pass
		}
		return StoreNegative
	}
	return Pass
}
