package pool

import "path"

// ProviderName is who runs m: its Provider, or its API's own provider
// when Provider is "" (the lone default upstream, the demo's mock).
func (m *Member) ProviderName() string {
	if m.Provider != "" {
		return m.Provider
	}
	return m.API
}

// AliasKey is the first of m's alias globs that model matches ("" when
// none does): the operator's name for what the request was sent as,
// which prices it when the answer names no priced model.
func (m *Member) AliasKey(model string) string {
	for _, g := range m.Aliases {
		if ok, _ := path.Match(g, model); ok {
			return g
		}
	}
	return ""
}

// Cloud reports whether a cloud runs m (azure, bedrock, vertex): its
// models are the configuration's to name, not a list its API serves.
func (m *Member) Cloud() bool {
	switch m.Provider {
	case "azure", "bedrock", "vertex":
		return true
	}
	return false
}
