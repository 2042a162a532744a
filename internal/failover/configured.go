package failover

import (
	"net/http"
	"slices"
	"strings"
)

// What the current Set is configured with, read without calling anyone:
// where lists are read, the model names clients may send, the alias a
// request matched, the upstreams' names.

// Primary names the first upstream of api by priority (configured order
// among equals) that serves a GET of path: where lists of stored objects
// are read, so pages follow one another on one upstream. "" when none
// does.
func (r *Router) Primary(api, path string) string {
	set := r.set.Load()
	best := -1
	name := ""
	for _, m := range set.Pool.Members() {
		if m.API == api && (best < 0 || m.Priority < best) && serves(set.Clients[m.Name], http.MethodGet, path) {
			best, name = m.Priority, m.Name
		}
	}
	return name
}

// ModelNames lists the model names clients may send to api's upstreams
// as the configuration names them: every upstream's alias keys and
// models entries that are no globs (no *, ? or [), in the file's order,
// each once. fromConfig reports whether api has a cloud upstream (azure,
// bedrock, vertex), whose own model lists name deployments and provider
// ids, not what clients send: only then is the list the answer to
// GET /v1/models, and names is nil otherwise. Nobody is called.
func (r *Router) ModelNames(api string) (names []string, fromConfig bool) {
	ms := r.set.Load().Pool.Members()
	for _, m := range ms {
		if m.API == api && m.Cloud() {
			fromConfig = true
			break
		}
	}
	if !fromConfig {
		return nil, false
	}
	names = []string{}
	seen := map[string]bool{}
	for _, m := range ms {
		if m.API != api {
			continue
		}
		for _, n := range slices.Concat(m.Aliases, m.Models) {
			if !seen[n] && !strings.ContainsAny(n, "*?[") {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	return names, true
}

// AliasKey is the alias glob of the upstream called name that model
// matched ("" when none does, or there is no such upstream now).
func (r *Router) AliasKey(name, model string) string {
	if m := r.set.Load().Pool.Member(name); m != nil {
		return m.AliasKey(model)
	}
	return ""
}

// Names lists the current Set's upstreams in their configured order.
func (r *Router) Names() []string {
	ms := r.set.Load().Pool.Members()
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Name
	}
	return out
}
