package server

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/corralhq/corral/internal/redistest"
)

// liveHeap is the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// TestHitsToClientsThatNeverReadShareTheEntry holds issue 33 point 18:
// clients that ask for a large cached answer and never read it each
// held a copy of it for as long as they held their connection (up to the
// write stall): a Redis hit decoded its own copy of the entry, and a hit
// replayed as a stream built its own events (twice the body), in either
// store. 30 such clients of a 4 MiB answer raised the heap by 120 MiB
// (Redis), 241 MiB (memory, streamed) and 361 MiB (Redis, streamed). A
// hit must write from the entry every reader shares, and a replay from
// events every streaming reader of that entry shares: the 30 clients may
// cost the entry and its replay once, not once each.
//
// Each client reads its answer's headers and nothing more, through a
// 4 KiB receive buffer against a 16 KiB send buffer, so the answer cannot
// hide in the kernel; the live heap is measured while all of them stall.
// One stalled client then reads its whole answer: it is what a client
// that reads gets.
func TestHitsToClientsThatNeverReadShareTheEntry(t *testing.T) {
	const size = 4 << 20
	reply := strings.Repeat("corral ", size/7)
	answer := fmt.Sprintf(`{"id":"chatcmpl-big","object":"chat.completion","created":1,"model":"gpt-4o-mini",`+
		`"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],`+
		`"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`, reply)
	// The upstream answers a short prompt with the 4 MiB answer, so the
	// requests themselves stay small.
	big := func(http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, answer)
		})
	}
	const (
		clients = 30
		// An entry and its replay (about twice the body) are at most
		// four copies; the copies the clients held were 30 to 90.
		bound = 6 * size
	)
	tests := []struct {
		name   string
		redis  bool
		stream bool
	}{
		{"memory", false, false},
		{"memory/stream", false, true},
		{"redis", true, false},
		{"redis/stream", true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, func(o *harnessOptions) {
				o.wrapUpstream = big
				o.wrapListener = func(l net.Listener) net.Listener { return tinySendBuffers{l} }
				// Longer than the test: no client is dropped while measured.
				o.server = func(so *Options) { so.WriteStall = 5 * time.Minute }
				if tt.redis {
					o.redis = redistest.Start(t)
				}
			})
			body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"a big answer"}]}`
			if a := send(context.Background(), h.gw.URL, acmeKey, body); a.status != 200 || a.body != answer {
				t.Fatalf("storing the answer: %d, %d bytes", a.status, len(a.body))
			}
			if tt.stream {
				body = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"a big answer"}]}`
			}
			// What a client that reads gets.
			want := send(context.Background(), h.gw.URL, acmeKey, body)
			if want.status != 200 || want.header.Get("X-Corral-Cache") != "HIT" || len(want.body) < size {
				t.Fatalf("a reading client: %d %q, %d bytes", want.status, want.header.Get("X-Corral-Cache"), len(want.body))
			}

			before := liveHeap()
			addr := strings.TrimPrefix(h.gw.URL, "http://")
			conns := make([]net.Conn, clients)
			readers := make([]*bufio.Reader, clients)
			for i := range conns {
				conns[i] = dialTiny(t, addr)
				fmt.Fprintf(conns[i], "POST /v1/chat/completions HTTP/1.1\r\nHost: corral\r\nAuthorization: Bearer %s\r\n"+
					"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", acmeKey, len(body), body)
				_ = conns[i].SetReadDeadline(time.Now().Add(time.Minute))
				readers[i] = bufio.NewReaderSize(conns[i], 4096)
				resp, err := http.ReadResponse(readers[i], nil)
				if err != nil {
					t.Fatalf("client %d: %v", i, err)
				}
				if resp.StatusCode != 200 || resp.Header.Get("X-Corral-Cache") != "HIT" {
					t.Fatalf("client %d: %d %q; want a 200 HIT", i, resp.StatusCode, resp.Header.Get("X-Corral-Cache"))
				}
				if i == 0 {
					defer func() {
						// The stalled client that reads at last gets the
						// whole answer.
						got, err := io.ReadAll(resp.Body)
						if err != nil || !bytes.Equal(got, []byte(want.body)) {
							t.Errorf("a stalled client that then read got %d bytes (%v); want the %d a reading client got", len(got), err, len(want.body))
						}
					}()
				}
			}
			during := liveHeap()
			grew := int64(during) - int64(before)
			t.Logf("live heap %.1f MiB before, %.1f MiB with %d clients stalled on a %d MiB answer: %+.1f MiB",
				float64(before)/(1<<20), float64(during)/(1<<20), clients, size>>20, float64(grew)/(1<<20))
			if grew > bound {
				t.Errorf("%d clients that never read a %d MiB hit grew the heap by %.1f MiB; want at most %d MiB (one entry and its replay, not a copy per client)",
					clients, size>>20, float64(grew)/(1<<20), bound>>20)
			}
		})
	}
}
