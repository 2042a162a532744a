package server

import (
	"net/http"
	"unicode"
	"unicode/utf8"

	"github.com/corralhq/corral/internal/cache/entry"
	"github.com/corralhq/corral/internal/spend"
)

// maxUsageModel bounds a model name kept in the usage split by model; a
// longer one is counted under spend.OtherModel.
const maxUsageModel = 256

// usageModel names the row of the usage split by model (by_model, the
// days of GET /admin/usage, the console's tables) that a request or an
// upstream call is counted in: the model that answered it, as its 200
// answer names it (the requested name when the answer names none). A
// request or call with no such answer (refused, failed, an upstream's
// error) is counted under spend.OtherModel, so every request and every
// call is in exactly one row and the rows sum to the tenant's totals.
//
// Only answers name rows, never a client's request alone: a row's name is
// one a 200 answer named, or the name an upstream answered 200 to, so the
// rows are bounded by the models the upstreams serve, not by what clients
// send (a request an upstream refused is other's).
// The price catalog's names (globs such as gpt-4o*) label only metrics.
func usageModel(e *entry.Entry, requested string) string {
	if e == nil || e.Status != http.StatusOK {
		return spend.OtherModel
	}
	return answeredModel(e.Model, requested)
}

// answeredModel is usageModel of a 200 answer that names model answered.
func answeredModel(answered, requested string) string {
	name := answered
	if name == "" {
		name = requested
	}
	if !keepableModel(name) {
		return spend.OtherModel
	}
	return name
}

// keepableModel reports whether name can name a usage row: not empty, not
// too long, valid UTF-8 with no control or format character (a bidi
// override would spoof a row in the console, a NUL would break the Redis
// fields that hold it).
func keepableModel(name string) bool {
	if name == "" || len(name) > maxUsageModel || !utf8.ValidString(name) {
		return false
	}
	for _, r := range name {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}
