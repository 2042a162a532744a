package main

import (
	"fmt"
	"io"

	"github.com/corralhq/corral/internal/tenant"
)

// keygen prints a new key for the tenant and the line for the tenants file.
// Only the hash goes in the file; the key is shown once.
func keygen(w io.Writer) error {
	key := tenant.NewKey()
	_, err := fmt.Fprintf(w, `key: %s

Give the key to the tenant; it is shown only this once.
Add its hash to the tenant's keys in the tenants file:

      - sha256: "%s"
`, key, tenant.HashKey(key))
	return err
}
