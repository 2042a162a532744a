package keying

import (
	"errors"
	"fmt"
	"slices"
	"unicode"
	"unicode/utf8"
)

// ErrAmbiguousKey reports a body whose top-level keys differ from each
// other, or from a field Corral reads, only in letter case. Errors that wrap
// it also wrap ErrInvalidJSON.
//
// Decoders disagree on such bodies: Go's encoding/json matches struct fields
// case-insensitively (the last of "model" and "MODEL" wins, and "MODEL"
// alone fills Model), Python's json and pydantic match exactly. Corral reads
// fields exactly, so without this rule a body could show Corral one model
// (or none) and the upstream another, past the model allow-list, or be keyed
// as one request and answered as another.
var ErrAmbiguousKey = errors.New("ambiguous key")

// readFields are the top-level fields whose value Corral reads or drops.
// A key that folds to one of them must be spelt exactly as here.
var readFields = []string{
	"background", "client_metadata", "conversation", "input", "max_completion_tokens", "max_output_tokens",
	"max_tokens", "messages", "metadata", "model", "n", "prompt", "prompt_cache_key",
	"safety_identifier", "store", "stream", "stream_options", "tools", "user",
}

// needsFold reports whether key could case-fold to something other than
// itself: it has an upper-case ASCII letter or a non-ASCII byte. Most keys
// are lower-case ASCII, and cost only this scan.
func needsFold(key []byte) bool {
	for _, b := range key {
		if b >= utf8.RuneSelf || ('A' <= b && b <= 'Z') {
			return true
		}
	}
	return false
}

// appendFold appends the case fold of key: every rune replaced by one
// member of its Unicode simple-folding orbit (the lower case of the
// smallest), so two keys fold alike exactly when some case-insensitive
// decoder could take one for the other. That includes Go's: the Kelvin sign
// folds like "k" and the long s like "s". key is valid UTF-8.
func appendFold(dst, key []byte) []byte {
	for i := 0; i < len(key); {
		b := key[i]
		if b < utf8.RuneSelf {
			if 'A' <= b && b <= 'Z' {
				b += 'a' - 'A'
			}
			dst = append(dst, b)
			i++
			continue
		}
		r, n := utf8.DecodeRune(key[i:])
		low := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			low = min(low, f)
		}
		dst = utf8.AppendRune(dst, unicode.ToLower(low))
		i += n
	}
	return dst
}

// checkRootKey refuses a top-level key that is a case variant of a field
// Corral reads ("MODEL", "Stream", "max_to\u212aens").
func (c *canon) checkRootKey(key []byte) error {
	if !needsFold(key) {
		return nil
	}
	c.fold = appendFold(c.fold[:0], key)
	if slices.Contains(readFields, string(c.fold)) {
		return fmt.Errorf("keying: %w: %w: top-level key %q is a case variant of %q before offset %d",
			ErrInvalidJSON, ErrAmbiguousKey, key, c.fold, c.pos)
	}
	return nil
}

// checkRootFolds refuses top-level members whose keys differ only in case.
// It runs only when some key needed folding.
func (c *canon) checkRootFolds(ms []member) error {
	folded := make([]string, len(ms))
	for i, m := range ms {
		c.fold = appendFold(c.fold[:0], c.keyOf(m))
		folded[i] = string(c.fold)
	}
	slices.Sort(folded)
	for i := 1; i < len(folded); i++ {
		if folded[i] == folded[i-1] {
			return fmt.Errorf("keying: %w: %w: two top-level keys fold to %q before offset %d",
				ErrInvalidJSON, ErrAmbiguousKey, folded[i], c.pos)
		}
	}
	return nil
}
