package tenant

import (
	"crypto/rand"
	"encoding/base64"
)

// KeyPrefix starts every key Corral makes (gateway keygen and the admin
// API), so a leaked one is recognisable (secret scanners, logs).
const KeyPrefix = "sk-corral-"

// shownChars is how many leading characters of a key a listing shows:
// KeyPrefix and two characters of the random part, enough to tell keys
// apart and far too few to guess the rest.
const shownChars = 12

// NewKey returns a fresh random tenant key: KeyPrefix and 32 random bytes,
// URL-safe base64. Only its HashKey is ever stored.
func NewKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// ShownPrefix is the part of key a listing may show (its first 12
// characters), so people can tell keys apart without the key.
func ShownPrefix(key string) string {
	if len(key) <= shownChars {
		return key
	}
	return key[:shownChars]
}
