package console

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// SessionTTL is how long a console session lasts.
const SessionTTL = 12 * time.Hour

// CookieName is the session cookie's name.
const CookieName = "corral_console"

// A session cookie verifies itself on every instance: it is the session's
// expiry and a random 256-bit id, then an HMAC-SHA256 of both keyed from
// the admin token (a key derived from it, never the token). No instance
// needs to have issued it, and rotating the admin token ends every
// session at once. Signing out revokes the id in Revocations (Redis when
// distributed), which every instance reads, until the session would have
// expired anyway.

const (
	expiryLen  = 8
	idLen      = 32
	macLen     = sha256.Size
	payloadLen = expiryLen + idLen
)

// revokedWait bounds the revocation check of every signed-in request: a
// Redis that hangs makes the console answer 503 in this time, not hold
// each page for the client's retries.
const revokedWait = 2 * time.Second

// errNoSession is a cookie that is absent, malformed, forged, expired or
// revoked: the visitor signs in again.
var errNoSession = errors.New("console: no valid session")

// sessions issues and checks session cookies.
type sessions struct {
	key     []byte
	revoked Revocations
	now     func() time.Time
}

// sessionKey derives the cookies' HMAC key from the admin token.
func sessionKey(adminToken string) []byte {
	m := hmac.New(sha256.New, []byte(adminToken))
	m.Write([]byte("corral console session v1"))
	return m.Sum(nil)
}

func (s *sessions) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, s.key)
	m.Write(payload)
	return m.Sum(nil)
}

// issue makes a new session's cookie value and its expiry.
func (s *sessions) issue() (string, time.Time) {
	exp := s.now().Add(SessionTTL).Truncate(time.Second)
	b := make([]byte, payloadLen, payloadLen+macLen)
	binary.BigEndian.PutUint64(b, uint64(exp.Unix()))
	_, _ = rand.Read(b[expiryLen:]) // crypto/rand.Read never fails (Go 1.24+)
	b = append(b, s.mac(b)...)
	return base64.RawURLEncoding.EncodeToString(b), exp
}

// parse checks a cookie's signature and expiry and returns its session id
// and expiry; it does not ask whether the session was revoked.
func (s *sessions) parse(value string) (id string, exp time.Time, err error) {
	b, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil || len(b) != payloadLen+macLen {
		return "", time.Time{}, errNoSession
	}
	if !hmac.Equal(b[payloadLen:], s.mac(b[:payloadLen])) {
		return "", time.Time{}, errNoSession
	}
	exp = time.Unix(int64(binary.BigEndian.Uint64(b)), 0)
	if !s.now().Before(exp) {
		return "", time.Time{}, errNoSession
	}
	return hex.EncodeToString(b[expiryLen:payloadLen]), exp, nil
}

// check is parse plus revocation: errNoSession for a session that is not
// (or no longer) valid, another error when the revocations could not be
// read, in which case the session is refused too (a signed-out cookie
// must never work again).
func (s *sessions) check(ctx context.Context, value string) (id string, exp time.Time, err error) {
	id, exp, err = s.parse(value)
	if err != nil {
		return "", time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, revokedWait)
	defer cancel()
	revoked, err := s.revoked.Revoked(ctx, id)
	if err != nil {
		return "", time.Time{}, err
	}
	if revoked {
		return "", time.Time{}, errNoSession
	}
	return id, exp, nil
}

// Revocations remembers signed-out sessions until they expire, for every
// instance that checks them.
type Revocations interface {
	// Revoke ends session id, which would have expired at until.
	Revoke(ctx context.Context, id string, until time.Time) error
	// Revoked reports whether session id was revoked.
	Revoked(ctx context.Context, id string) (bool, error)
}

// MemoryRevocations keeps revoked sessions in process, for one instance
// that need not remember them across a restart (the gateway's embedded
// mode keeps them in BoltRevocations, so a restart forgets no sign-out).
// It holds one entry per sign-out of the last SessionTTL, each dropped
// once its session would have expired.
type MemoryRevocations struct {
	now func() time.Time
	mu  sync.Mutex           // protects ids
	ids map[string]time.Time // session id → its expiry
}

// NewMemoryRevocations returns an empty set on the clock now (nil: the
// wall clock).
func NewMemoryRevocations(now func() time.Time) *MemoryRevocations {
	if now == nil {
		now = time.Now
	}
	return &MemoryRevocations{now: now, ids: map[string]time.Time{}}
}

// Revoke implements Revocations.
func (m *MemoryRevocations) Revoke(_ context.Context, id string, until time.Time) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	for k, exp := range m.ids {
		if !now.Before(exp) {
			delete(m.ids, k)
		}
	}
	m.ids[id] = until
	return nil
}

// Revoked implements Revocations.
func (m *MemoryRevocations) Revoked(_ context.Context, id string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.ids[id]
	return ok, nil
}
