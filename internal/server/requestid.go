package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync/atomic"
)

// requestIDHeader is echoed when the client sends a sane one, else generated.
const requestIDHeader = "X-Request-Id"

// edgeKey is the context key of a request's *edge.
type edgeKey struct{}

// edge is the per-request state the edge middleware share: the request
// id, the access-log record and the writer that watches the status. It
// is one allocation and one context value for all three (they used to be
// three allocations, two context values and two request copies a
// request). Only the request's own goroutine writes it.
type edge struct {
	id  string
	idv [1]string // id as the X-Request-Id header value
	rec logRecord
	sw  statusWriter
}

func edgeFrom(ctx context.Context) *edge {
	e, _ := ctx.Value(edgeKey{}).(*edge)
	return e
}

// requestIDs makes ids that are unique across instances (a random prefix per
// process) and cheap (a counter, no syscall per request).
type requestIDs struct {
	prefix string
	n      atomic.Uint64
}

func newRequestIDs() *requestIDs {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &requestIDs{prefix: "corral-" + hex.EncodeToString(b[:]) + "-"}
}

func (g *requestIDs) next() string {
	var b [64]byte
	return string(strconv.AppendUint(append(b[:0], g.prefix...), g.n.Add(1), 10))
}

// requestID sets X-Request-Id on the request (so it reaches the upstream),
// the response and the context.
func requestID(ids *requestIDs) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			id := header(r.Header, requestIDHeader)
			if !validRequestID(id) {
				id = ids.next()
				r.Header.Set(requestIDHeader, id)
			}
			e := &edge{id: id, idv: [1]string{id}}
			w.Header()[requestIDHeader] = e.idv[:]
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), edgeKey{}, e)))
		})
	}
}

// validRequestID accepts short ids of safe characters, so a client cannot
// inject log lines or huge headers through it.
func validRequestID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}

// requestIDFrom returns the request id in ctx.
func requestIDFrom(ctx context.Context) string {
	if e := edgeFrom(ctx); e != nil {
		return e.id
	}
	return ""
}
