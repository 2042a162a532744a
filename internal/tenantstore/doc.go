// Package tenantstore keeps the tenants and keys an operator creates
// through the admin API, and their audit trail, in Redis (distributed mode)
// or in a bbolt file under CORRAL_DATA_DIR (embedded mode).
//
// Every change is a value (TenantCreated, TenantUpdated, TenantDeleted,
// KeyCreated, KeyRevoked) that Store.Apply applies to the latest version
// of its tenant, writes together with its audit event, and announces to
// every instance, all in one step: the admin API, the console and the CLI
// all go through Apply, so they cannot drift in what a change does or how
// it is recorded.
//
// The store is not on the request path. Each instance mirrors it into
// memory (Mirror: list once, then watch, with a full resync every 10 s
// that heals a lost notification, after client-go's informer), and
// authentication reads only that copy.
//
// Keys are never stored: a key record holds the key's SHA-256, its first
// 12 characters for people to recognise it, and its dates. Audit events
// carry a key's id, never the key or its digest.
package tenantstore
