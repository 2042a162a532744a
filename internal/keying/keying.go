// Package keying turns a request body into a canonical, versioned,
// tenant-scoped prompt key, and names the Redis keys that hang off it.
//
// Corral promises that one unique prompt costs one upstream call. "Unique"
// has to ignore what does not change the answer (key order, whitespace,
// number spelling, escapes, the streaming switch) and keep everything that
// might (every other field, including ones Corral does not know). Parse does
// that in one pass over the raw bytes and, on the way, extracts the facts the
// gateway needs (model, stream, token budget), so a body is scanned once per
// request and never decoded into interface{} and re-encoded.
//
// # Canonical form, version v1
//
// The key is the hex SHA-256 of
//
//	"corral-key v1\x00" + len(tenant) + ":" + tenant + len(endpoint) + ":" + endpoint + body
//
// where the lengths are decimal and body is the canonical body. The lengths
// keep tenant, endpoint and body apart whatever bytes they hold. The canonical
// body is the request body with:
//
//   - no insignificant whitespace;
//   - object members sorted by key, at every depth, comparing the decoded key
//     bytes;
//   - strings decoded and re-escaped one way: `\"`, `\\`, `\b`, `\f`, `\n`,
//     `\r`, `\t`, other control characters as `\u00xx` (lower-case hex),
//     a lone UTF-16 surrogate as `\udxxx`, and everything else as raw UTF-8
//     (so "\u0041", "A" and "\/" vs "/" agree);
//   - numbers rewritten from their exact decimal value, never through
//     float64, so large integers such as seeds keep every digit. With
//     value = ±D×10^E (D without leading or trailing zeros) and n = len(D)+E:
//     integers with E ≤ 21 are written out ("100", "12345678901234567890123"),
//     other values with -6 < n ≤ 21 use a decimal point ("0.5", "1.25",
//     "0.000001"), anything else uses an exponent ("1.5e30", "1e-7").
//     "-0" is "0". So 1, 1.0, 1e0, 10e-1 and 0.1e1 are the same number;
//   - messages[].content (when a string) and messages[].content[].text
//     trimmed of leading and trailing Unicode white space (unicode.IsSpace).
//     "prompt" and "input" are not trimmed: for completions and embeddings
//     white space is part of the input;
//   - the top-level fields the API's Policy names removed. OpenAI's policy
//     (Parse's) removes stream, stream_options, user and metadata, so a
//     streaming and a non-streaming request share one entry; store stays
//     (a stored completion is not an unstored one). They are removed only
//     when their value has a type the API accepts (stream: boolean or
//     null; metadata: object or null; user: string or null;
//     stream_options: null, or an object when "stream" is true, since the
//     API rejects stream_options without streaming). Any other value stays
//     in the key, so a request the upstream rejects for that field does not
//     share a (negative) cache entry with a valid one;
//   - where the Policy says so (Policy.WithUnstoredItemIDs, the Responses
//     API's input), the string "id" of the items of one top-level array
//     whose string "type" the policy names, when the top-level "store" is
//     false: such an item is never stored, so its id names nothing the
//     answer can depend on.
//
// Everything else, at any depth, is part of the key, including array order,
// null values (null is not the same as absent) and the type of a value ("1"
// is not 1).
//
// # Versioning
//
// Version names the canonical form and is part of both the hash input and
// every Redis key. Any change to the canonical form that could serve an old
// entry under a new meaning, however small, must bump Version: entries
// written under the old form then simply stop matching. The one exception is
// a policy leaving out one more field that never changed the answer (see
// Policy): the old entries keep their meaning and are reached by more
// requests that mean the same, so v1 stays.
//
// # Rejected input
//
// Parse returns an error wrapping ErrInvalidJSON for anything that is not a
// single JSON object (RFC 8259), and also for:
//
//   - duplicate object keys, at any depth: JSON parsers disagree on which
//     one wins, so a body with {"model":"a","model":"b"} could be keyed and
//     allow-listed as one model and answered by the upstream as the other;
//   - invalid UTF-8 in a string (RFC 8259 §8.1 requires UTF-8; a lenient
//     parser would replace it with U+FFFD and merge distinct bodies).
//     Escaped lone surrogates ("\ud800") are valid JSON and are kept as
//     they are, not replaced;
//   - nesting deeper than MaxDepth objects and arrays, so hostile input
//     cannot make the scanner recurse without bound;
//   - top-level keys that differ only in letter case from each other or
//     from a field Corral reads ({"MODEL":"x"}, {"model":"a","Model":"b"}),
//     also wrapping ErrAmbiguousKey: case-insensitive decoders upstream
//     (Go's encoding/json) would read a model Corral did not check. Nested
//     keys may differ in case (JSON schemas name properties freely);
//   - a number whose exponent has more than MaxExponentDigits digits, also
//     wrapping ErrNumberOutOfRange, so every number is canonicalised in
//     time linear in its length.
package keying

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"sync"
)

// Version is the canonical-form version. It is part of every key hash and
// every Redis key name; see the package documentation for when to bump it.
const Version = "v1"

// MaxDepth is the deepest nesting of objects and arrays a body may have. The
// body itself is depth 1.
const MaxDepth = 128

// hashPrefix starts every hash input; it carries the version so two forms
// can never produce the same input.
const hashPrefix = "corral-key " + Version + "\x00"

// ErrInvalidJSON reports a body that cannot be keyed: malformed JSON, not an
// object, trailing data, duplicate keys, invalid UTF-8 or too deep nesting.
var ErrInvalidJSON = errors.New("invalid JSON body")

// Request is what the gateway learns from one pass over a request body.
type Request struct {
	Hash         string // hex sha256 of the canonical form (64 chars)
	Model        string // top-level "model" ("" when absent or not a string)
	HasModel     bool   // a top-level "model" is present, whatever its value
	Stream       bool   // top-level "stream": true
	IncludeUsage bool   // "stream_options": {"include_usage": true}
	MaxTokens    int    // "max_completion_tokens" if present, else "max_tokens", else 0
	N            int    // "n", default 1
}

// Parse canonicalises body for tenant and endpoint and returns its key hash
// together with the request facts, in one pass over body. The error, if any,
// wraps ErrInvalidJSON.
//
// Facts: MaxTokens and N count only when their value is an integer that fits
// an int (1e3 and 1000.0 are integers); MaxTokens must be ≥ 0 and N ≥ 1,
// otherwise the field is treated as absent. (A token estimate counts the
// whole body, which its length gives.) Parse does not read or keep body
// after it returns.
func Parse(tenant, endpoint string, body []byte) (Request, error) {
	return ParseWith(OpenAI, tenant, endpoint, body)
}

// ParseWith is Parse under an API's keying policy.
func ParseWith(p *Policy, tenant, endpoint string, body []byte) (Request, error) {
	c := getCanon()
	defer putCanon(c)
	c.policy = p

	c.out = appendHashPrefix(c.out[:0], tenant, endpoint)
	if err := c.run(body); err != nil {
		return Request{}, err
	}
	sum := sha256.Sum256(c.canonical())
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], sum[:])

	r := c.req
	r.Hash = string(h[:])
	return r, nil
}

// Canonical returns the canonical form of body as described in the package
// documentation, without the version, tenant and endpoint that Parse adds
// before hashing. It is valid JSON (except that invalid input is rejected
// first), and canonicalising it again returns the same bytes.
func Canonical(body []byte) ([]byte, error) {
	c := getCanon()
	defer putCanon(c)
	c.policy = OpenAI

	c.out = c.out[:0]
	if err := c.run(body); err != nil {
		return nil, err
	}
	return append([]byte(nil), c.canonical()...), nil
}

func appendHashPrefix(dst []byte, tenant, endpoint string) []byte {
	dst = append(dst, hashPrefix...)
	dst = strconv.AppendInt(dst, int64(len(tenant)), 10)
	dst = append(dst, ':')
	dst = append(dst, tenant...)
	dst = strconv.AppendInt(dst, int64(len(endpoint)), 10)
	dst = append(dst, ':')
	dst = append(dst, endpoint...)
	return dst
}

// maxPooledBytes bounds the scratch space a pooled canonicaliser keeps, so
// one huge body does not pin megabytes for the life of the process.
const maxPooledBytes = 256 << 10

var canonPool = sync.Pool{New: func() any { return new(canon) }}

func getCanon() *canon { return canonPool.Get().(*canon) }

func putCanon(c *canon) {
	c.in, c.lastStr = nil, nil
	if cap(c.out) > maxPooledBytes || cap(c.final) > maxPooledBytes || cap(c.fold) > maxPooledBytes ||
		cap(c.str) > maxPooledBytes || cap(c.keys) > maxPooledBytes ||
		cap(c.num) > maxPooledBytes || cap(c.members) > maxPooledBytes/40 ||
		cap(c.order) > maxPooledBytes/40 || cap(c.objects) > maxPooledBytes/48 ||
		cap(c.itemIDs) > maxPooledBytes/8 {
		return
	}
	canonPool.Put(c)
}
