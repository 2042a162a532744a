package keying

// Policy is an API's keying policy: which top-level fields the canonical
// form leaves out because they do not change the answer. The canonicaliser
// itself is the same for every API; each wire format (internal/wire/...)
// brings its policy. A policy is part of the canonical form: changing one
// that is in use means bumping Version, unless no old entry can be served
// under a new meaning. Dropping a field (or a nested id, see
// WithUnstoredItemIDs) that never changed the answer is such a change: the
// entries already stored stay right, and only become reachable by more
// requests that mean the same (a body without the field keys as before).
// Keeping a field that was dropped is not: a body without it would still
// find entries answered for bodies with any value of it.
//
// A field is dropped only when its value has one of the kinds the policy
// names, the kinds the API accepts for it: any other value stays in the
// key, so a request the upstream rejects for that field does not share a
// (negative) cache entry with a valid one.
type Policy struct {
	rules []rule     // few: a linear scan beats hashing every top-level key
	items *itemsRule // nil: every item id is part of the key
}

// itemsRule is WithUnstoredItemIDs's rule.
type itemsRule struct {
	field string   // the top-level array whose items it looks at
	types []string // the item types whose id is dropped
}

type rule struct {
	field string
	drop  Drop
}

// NewPolicy returns the policy that drops each field of drop as its Drop
// says.
func NewPolicy(drop map[string]Drop) *Policy {
	p := &Policy{}
	for f, d := range drop {
		p.rules = append(p.rules, rule{f, d})
	}
	return p
}

// WithUnstoredItemIDs returns a copy of p that also leaves out the "id"
// of each element of the top-level array field whose "type" is one of
// types, when the body's top-level "store" is false. Both must be strings
// (and "store" the literal false: absent or null is the API's default,
// stored), otherwise the id stays.
//
// It is for APIs that store a request's items under their ids unless
// told not to (the Responses API's input): an unstored item's id names
// nothing anyone can read back, so for an item that carries its whole
// content it cannot change the answer, while clients mint a fresh one for
// the same item on every run. types must list only such items: an item
// whose id the upstream resolves (an item_reference, a reasoning item it
// may read back from storage) keeps its id whatever store says.
func (p *Policy) WithUnstoredItemIDs(field string, types ...string) *Policy {
	q := *p
	q.items = &itemsRule{field: field, types: append([]string(nil), types...)}
	return &q
}

// itemType reports whether an item of the policy's array with this type
// has its id dropped when unstored.
func (p *Policy) itemType(typ []byte) bool {
	if p.items == nil {
		return false
	}
	for _, t := range p.items.types {
		if t == string(typ) {
			return true
		}
	}
	return false
}

// drop is the policy's word on the top-level member key.
func (p *Policy) drop(key []byte) Drop {
	for _, r := range p.rules {
		if len(r.field) == len(key) && r.field == string(key) {
			return r.drop
		}
	}
	return Drop{}
}

// Drop is when a field is left out of the key.
type Drop struct {
	// Always: the kinds of value for which the field is dropped.
	Always Kinds
	// WhenStreaming: the kinds for which it is dropped only when "stream"
	// is true (OpenAI rejects stream_options without streaming, so it is
	// part of the key then).
	WhenStreaming Kinds
}

// Kinds is a set of JSON value kinds.
type Kinds uint8

// The JSON value kinds.
const (
	Null   Kinds = 1 << kindNull
	Bool   Kinds = 1 << kindBool
	Number Kinds = 1 << kindNumber
	String Kinds = 1 << kindString
	Array  Kinds = 1 << kindArray
	Object Kinds = 1 << kindObject
)

func (ks Kinds) has(k valueKind) bool { return ks&(1<<k) != 0 }

// OpenAI is the policy of OpenAI's legacy Completions and Embeddings
// (canonical form v1): stream, stream_options, user and metadata do not
// change the answer. Parse and Canonical use it; chat completions add the
// fields of their own API (internal/wire/openai's ChatPolicy). store is
// part of the key: a stored completion and an unstored one differ (one has
// an id its owner can read back).
var OpenAI = NewPolicy(map[string]Drop{
	"stream":         {Always: Bool | Null},
	"stream_options": {Always: Null, WhenStreaming: Object},
	"metadata":       {Always: Object | Null},
	"user":           {Always: String | Null},
})
