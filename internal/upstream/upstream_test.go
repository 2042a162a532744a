package upstream

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"
)

func TestForwardHeader(t *testing.T) {
	src := http.Header{}
	for _, k := range []string{"Authorization", "Api-Key", "Cookie", "Cache-Control", "X-Corral-Cache-Ttl", "Connection", "X-Drop-Me",
		"Openai-Organization", "Accept-Encoding", "Content-Type", "User-Agent", "X-Stainless-Lang", "Openai-Beta"} {
		src.Set(k, "v")
	}
	src.Set("Connection", "X-Drop-Me")
	dst := http.Header{}
	forwardHeader(dst, src, false)
	var got []string
	for k := range dst {
		got = append(got, k)
	}
	want := map[string]bool{"Content-Type": true, "User-Agent": true, "X-Stainless-Lang": true, "Openai-Beta": true}
	if len(got) != len(want) {
		t.Errorf("forwarded %v; want exactly %v", got, want)
	}
	for _, k := range got {
		if !want[k] {
			t.Errorf("forwarded %s", k)
		}
	}
}

// TestForwardHeaderDropsMethodOverrides: an upstream that honours a
// method override would run a method Corral never checked (a POST that
// lists as a GET), so no spelling of one is forwarded.
func TestForwardHeaderDropsMethodOverrides(t *testing.T) {
	src := http.Header{}
	for _, k := range []string{"X-HTTP-Method-Override", "X-HTTP-Method", "X-Method-Override", "x-http-method-override"} {
		src.Add(k, "GET")
	}
	src.Set("Content-Type", "multipart/form-data")
	dst := http.Header{}
	forwardHeader(dst, src, true)
	if len(dst) != 1 || dst.Get("Content-Type") == "" {
		t.Errorf("forwarded %v; want Content-Type only", dst)
	}
}

func TestCopyResponseHeader(t *testing.T) {
	src := http.Header{"Content-Type": {"application/json"}, "Content-Length": {"5"}, "X-Ratelimit-Remaining-Requests": {"1"},
		"Set-Cookie": {"a=b"}, "Openai-Processing-Ms": {"12"}, "Transfer-Encoding": {"chunked"},
		"X-Request-Id": {"req_1"}, "Server": {"cloudflare"}, "Alt-Svc": {"h3"}}
	dst := http.Header{}
	CopyResponseHeader(dst, src)
	if len(dst) != 2 || dst.Get("Content-Type") == "" || dst.Get("Openai-Processing-Ms") == "" {
		t.Errorf("copied %v; want Content-Type and Openai-Processing-Ms only", dst)
	}
}

func TestDoSendsBodyUntouchedWithOwnKey(t *testing.T) {
	body := []byte(`{"b":1,  "a":2, "unknown_field":{"x":[1.0e0]}}`)
	var gotBody []byte
	var gotAuth, gotPath string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotBody, _ = io.ReadAll(r.Body)
		gotAuth, gotPath = r.Header.Get("Authorization"), r.URL.RequestURI()
		w.WriteHeader(201)
	}))
	defer srv.Close()
	c, err := New(Options{BaseURL: srv.URL + "/v1/", APIKey: "sk-up"})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(context.Background(), Request{Method: "POST", Path: "/chat/completions", RawQuery: "a=1", Body: body,
		Header: http.Header{"Authorization": {"Bearer tenant"}}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if string(gotBody) != string(body) || gotAuth != "Bearer sk-up" || gotPath != "/v1/chat/completions?a=1" || resp.StatusCode != 201 {
		t.Errorf("upstream got body %q auth %q path %q (status %d)", gotBody, gotAuth, gotPath, resp.StatusCode)
	}
}

func TestDoKinds(t *testing.T) {
	block := make(chan struct{})
	arrived := make(chan struct{}, 10)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-block:
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	defer close(block)

	c, _ := New(Options{BaseURL: slow.URL, Timeout: 50 * time.Millisecond})
	if _, err := c.Do(context.Background(), Request{Method: "GET", Path: "/"}); KindOf(err) != Timeout {
		t.Errorf("slow upstream: kind %v (%v); want timeout", KindOf(err), err)
	}

	c, _ = New(Options{BaseURL: slow.URL, Timeout: time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	<-arrived // the timeout case's request
	go func() { <-arrived; cancel() }()
	if _, err := c.Do(ctx, Request{Method: "GET", Path: "/"}); KindOf(err) != Canceled {
		t.Errorf("caller cancel: kind %v (%v); want canceled", KindOf(err), err)
	}

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	var dials atomic.Int32
	tr := NewTransport(TransportOptions{})
	dial := tr.DialContext
	tr.DialContext = func(ctx context.Context, n, a string) (net.Conn, error) {
		dials.Add(1)
		return dial(ctx, n, a)
	}
	c, _ = New(Options{BaseURL: "http://" + addr, Transport: tr})
	_, err := c.Do(context.Background(), Request{Method: "POST", Path: "/", Body: []byte("{}")})
	var de *DialError
	if KindOf(err) != Connect || !errors.As(err, &de) {
		t.Errorf("refused: kind %v (%v); want connect with a DialError", KindOf(err), err)
	}
	if dials.Load() != 2 {
		t.Errorf("dials = %d; want 2 (one retry of a dial failure)", dials.Load())
	}
}
