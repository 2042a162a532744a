package ratelimit

import (
	"errors"
	"fmt"
)

// KeyPrefix starts every rate-limit key. The version lets a future change of
// the stored format live next to the old one.
const KeyPrefix = "corral:v1:rl:"

// Kind is what a limit counts.
type Kind string

const (
	Requests Kind = "req" // requests per period
	Tokens   Kind = "tok" // tokens (estimated, then charged) per period
)

// Suffix is the kind's name in OpenAI's rate-limit headers: "requests" or
// "tokens", for SetHeaders.
func (k Kind) Suffix() string {
	switch k {
	case Requests:
		return "requests"
	case Tokens:
		return "tokens"
	}
	return string(k)
}

// ErrBadTenant is returned by Key for a tenant id outside [a-z0-9_-]{1,64}.
var ErrBadTenant = errors.New("ratelimit: bad tenant id")

// Key is the bucket key of tenant's limit of kind:
// "corral:v1:rl:{acme}:req". The braces are a Redis Cluster hash tag: all of
// a tenant's limits share one slot. The tenant id is validated here, before
// it enters a key, so no id can reach into another's key space.
func Key(tenant string, kind Kind) (string, error) {
	if !validTenant(tenant) {
		return "", fmt.Errorf("%w: %q", ErrBadTenant, tenant)
	}
	if kind != Requests && kind != Tokens {
		return "", fmt.Errorf("ratelimit: unknown kind %q", string(kind))
	}
	return KeyPrefix + "{" + tenant + "}:" + string(kind), nil
}

func validTenant(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}
