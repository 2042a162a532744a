package keying

import "strings"

// Kind says what a Redis key holds for one prompt.
type Kind byte

// The kinds of key one prompt has.
const (
	Response Kind = 'r' // the positive cache entry
	Negative Kind = 'n' // the negative cache entry
	Lock     Kind = 'l' // the leader lock
	Stream   Kind = 's' // the live stream record followers read
	Refresh  Kind = 'f' // the marker of a stale entry's recent background refresh
	Failure  Kind = 't' // the leader's transient failure, for the requests that waited for it
)

// namePrefix starts every Redis key; the version in it keeps entries of
// different canonical forms apart.
const namePrefix = "corral:" + Version + ":{"

// Name returns the Redis key of kind for the prompt hash of tenant:
//
//	corral:v1:{<tenant>:<hash>}:<kind>
//
// The braces are a Redis Cluster hash tag, so every key of one prompt lands
// in one slot and can be used together in a script or transaction. tenant
// must satisfy ValidTenantID, which keeps braces and glob characters out of
// the name.
func Name(tenant, hash string, kind Kind) string {
	var b strings.Builder
	b.Grow(len(namePrefix) + len(tenant) + 1 + len(hash) + 3)
	b.WriteString(namePrefix)
	b.WriteString(tenant)
	b.WriteByte(':')
	b.WriteString(hash)
	b.WriteString("}:")
	b.WriteByte(byte(kind))
	return b.String()
}

// TenantPattern returns a SCAN MATCH pattern for every key of tenant, such
// as "corral:v1:{acme:*". tenant must satisfy ValidTenantID.
func TenantPattern(tenant string) string {
	return namePrefix + tenant + ":*"
}

// ValidTenantID reports whether id is a valid tenant id: 1 to 64 of
// [a-z0-9_-]. Tenant ids go inside Redis keys and key patterns, so nothing
// else is allowed.
func ValidTenantID(id string) bool {
	if len(id) == 0 || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		b := id[i]
		if !(b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' || b == '-') {
			return false
		}
	}
	return true
}
