package keying

// Policy is an API's keying policy: which top-level fields the canonical
// form leaves out because they do not change the answer. The canonicaliser
// itself is the same for every API; each wire format (internal/wire/...)
// brings its policy. A policy is part of the canonical form: changing one
// that is in use means bumping Version, unless no old entry can be served
// under a new meaning: keeping a field that was dropped only splits keys
// (a body without the field keys as before, and the bodies with it get
// keys of their own), and dropping a field that never changed the answer
// only joins bodies whose answers are the same.
//
// A field is dropped only when its value has one of the kinds the policy
// names, the kinds the API accepts for it: any other value stays in the
// key, so a request the upstream rejects for that field does not share a
// (negative) cache entry with a valid one.
type Policy struct {
	rules []rule // few: a linear scan beats hashing every top-level key
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
