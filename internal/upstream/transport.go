package upstream

import (
	"context"
	"net"
	"net/http"
	"time"
)

// TransportOptions tune the pooled transport. Zero values take the
// documented defaults.
type TransportOptions struct {
	// DialTimeout bounds a TCP connect. Default 5s: a model API that takes
	// longer to accept a connection is down.
	DialTimeout time.Duration
	// TLSHandshakeTimeout bounds the TLS handshake. Default 10s.
	TLSHandshakeTimeout time.Duration
	// ResponseHeaderTimeout bounds the wait for response headers after the
	// request is written. Default 120s (models think before the first byte).
	ResponseHeaderTimeout time.Duration
	// IdleConnTimeout closes pooled connections idle this long. Default 90s.
	IdleConnTimeout time.Duration
	// MaxIdleConnsPerHost is the pool per upstream host. Default 256: the
	// standard library's 2 would make a busy gateway re-dial constantly.
	MaxIdleConnsPerHost int
}

// NewTransport returns an http.Transport tuned for a gateway that talks to
// a few upstream hosts at high concurrency. Dial failures come back as
// *DialError so the client can retry exactly those.
func NewTransport(o TransportOptions) *http.Transport {
	if o.DialTimeout <= 0 {
		o.DialTimeout = 5 * time.Second
	}
	if o.TLSHandshakeTimeout <= 0 {
		o.TLSHandshakeTimeout = 10 * time.Second
	}
	if o.ResponseHeaderTimeout <= 0 {
		o.ResponseHeaderTimeout = 120 * time.Second
	}
	if o.IdleConnTimeout <= 0 {
		o.IdleConnTimeout = 90 * time.Second
	}
	if o.MaxIdleConnsPerHost <= 0 {
		o.MaxIdleConnsPerHost = 256
	}
	d := &net.Dialer{Timeout: o.DialTimeout, KeepAlive: 30 * time.Second}
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := d.DialContext(ctx, network, addr)
			if err != nil {
				return nil, &DialError{Err: err}
			}
			return c, nil
		},
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          4 * o.MaxIdleConnsPerHost,
		MaxIdleConnsPerHost:   o.MaxIdleConnsPerHost,
		IdleConnTimeout:       o.IdleConnTimeout,
		TLSHandshakeTimeout:   o.TLSHandshakeTimeout,
		ResponseHeaderTimeout: o.ResponseHeaderTimeout,
		ExpectContinueTimeout: time.Second,
	}
}
