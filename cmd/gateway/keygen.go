package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"github.com/corralhq/corral/internal/tenant"
)

// newKey returns a fresh random tenant key: 32 random bytes, URL-safe.
func newKey() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails on supported platforms
	return "sk-corral-" + base64.RawURLEncoding.EncodeToString(b[:])
}

// keygen prints a new key for the tenant and the line for the tenants file.
// Only the hash goes in the file; the key is shown once.
func keygen(w io.Writer) error {
	key := newKey()
	_, err := fmt.Fprintf(w, `key: %s

Give the key to the tenant; it is shown only this once.
Add its hash to the tenant's keys in the tenants file:

      - sha256: "%s"
`, key, tenant.HashKey(key))
	return err
}
